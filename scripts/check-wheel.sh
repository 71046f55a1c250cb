#!/usr/bin/env bash
# make check-wheel (issue 55): the wheel make wheel built, installed the way a user installs
# it, checked from outside the checkout (python/tests/check_wheel.py).
#   - a fresh venv from the project venv's base Python; its only package is torch, the
#     project's (a .pth names the project venv's site-packages: torch is not downloaded
#     again), and nothing is fetched (--no-index);
#   - pip install dist/graph_opt-<version>-*.whl, then check_wheel.py from a scratch
#     directory, with PYTHONPATH unset: ldd of every ELF file in the wheel, the console
#     commands, the three-line profile; then python/tests/check_install.py's checks (the
#     MILP planner through the bundled solver, export -> add-optimizer -> .pt2 -> fx).
# Variables: BUILD_DIR (default build), WHEEL_DIR (dist).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
build=${BUILD_DIR:-build}
out=${WHEEL_DIR:-dist}
venv=$(scripts/venv-dir.sh)
version=$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
wheel=$(ls -t "$out"/graph_opt-"$version"-*.whl 2>/dev/null | head -1 || true)
[[ -n "$wheel" ]] || { echo "check-wheel: no $out/graph_opt-$version-*.whl: run make wheel" >&2; exit 2; }
wheel=$(cd "$(dirname "$wheel")" && pwd)/$(basename "$wheel")

dir="$root/$build/check-wheel"
rm -rf "$dir" && mkdir -p "$dir"
base=$("$venv/bin/python" -c 'import sys; print(sys._base_executable)')
"$base" -m venv "$dir/venv"
theirs=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
mine=$("$dir/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$theirs" > "$mine/project-venv.pth"
echo "check-wheel: installing $(basename "$wheel") ($(du -h "$wheel" | cut -f1)) into a fresh venv"
env -u PYTHONPATH "$dir/venv/bin/pip" install -q --no-index "$wheel"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
env -u PYTHONPATH -u LD_LIBRARY_PATH "$dir/venv/bin/python" "$root/python/tests/check_wheel.py" "$work"
env -u PYTHONPATH -u LD_LIBRARY_PATH "$dir/venv/bin/python" "$root/python/tests/check_install.py" \
  "$root/examples/mlp_train_step.gir"
