#!/usr/bin/env bash
# Prints the directory of the project's virtual environment. It lives outside the clone, keyed
# by a hash of requirements.txt: fresh clones on one machine share it, and changing a pin makes
# a new one.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
hash=$(sha256sum "$root/requirements.txt" | cut -c1-16)
echo "${GRAPHOPT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/graph-opt}/venv-$hash"
