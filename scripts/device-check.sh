#!/usr/bin/env bash
# graph-opt's CUDA checks, prepared on this machine and run on a lent GPU machine
# (docs/Building.md, "The device check"; issue 56).
#
#   scripts/device-check.sh pack   builds graph-opt here (make build: against the venv's torch,
#                                  the CUDA wheel), strips its programs and copies them with the
#                                  shared libraries a bare CUDA+PyTorch image lacks into
#                                  $DEVICE_PACK (default .device-pack, git-ignored), under 60 MiB
#   scripts/device-check.sh run    on the GPU machine, with the image's python3 and torch: exports
#                                  the models, runs every check, and writes device-check.json and
#                                  device-check.log under $OUT (default build/device-check);
#                                  within 8 minutes. Without a GPU: one line, exit 0.
#
# On the device tool: run(command="scripts/device-check.sh run", carry=[".device-pack"]).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
verb=${1:-}
case "$verb" in
  pack)
    make --no-print-directory build >&2
    exec "$(scripts/venv-dir.sh)/bin/python" scripts/device_check.py pack ;;
  run)
    # No GPU, nothing to check: said before any Python import (a machine without
    # torch has nothing to run either).
    if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
      echo "device-check: no NVIDIA GPU here (nvidia-smi lists none); nothing to check"
      exit 0
    fi
    shift
    exec python3 scripts/device_check.py run "$@" ;;
  *)
    echo "usage: scripts/device-check.sh pack|run" >&2
    exit 2 ;;
esac
