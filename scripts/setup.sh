#!/usr/bin/env bash
# Idempotent setup for a fresh Debian 12 machine: the Debian packages graph-opt builds with,
# and the Python virtual environment from requirements.txt (plus requirements-report.txt for the
# HTML profile report). A second run does nothing but check.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

debs=(cmake ninja-build ccache g++ python3-venv
      python3-dev   # Python.h for the graph_opt extension module (python/)
      llvm-14-dev llvm-14-tools libabsl-dev
      libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev
      libbenchmark-tools   # Google Benchmark's compare.py: `make bench-compare` on micro runs
      coinor-libcbc-dev pkgconf   # CBC, the MILP solver of checkpoint{planner=milp}, found by pkg-config
      libboost-dev   # Boost.Graph's max-flow (headers): the checkpoint planner's minimum cuts
      libsqlite3-dev   # SQLite's C API: the operator cost database (graph-opt-costdb, docs/CostDB.md)
      libxgboost-dev   # XGBoost's C API: the cost database's learned predictor (docs/CostDB.md)
      clang-14 libclang-rt-14-dev   # `make fuzz`: clang and libFuzzer (libclang_rt.fuzzer), ASan, UBSan
      chromium)   # headless Chromium renders the HTML profile report in its test

missing=()
for p in "${debs[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  sudo=""
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || { echo "setup: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
    sudo=sudo
  fi
  $sudo apt-get update -q
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

venv=$("$root/scripts/venv-dir.sh")
stamp="$venv/.graphopt-ready"
if [[ ! -f "$stamp" ]]; then
  python=${GRAPHOPT_BASE_PYTHON:-python3}
  echo "setup: creating Python environment $venv (torch download, a few minutes)"
  rm -rf "$venv"
  mkdir -p "$(dirname "$venv")"
  "$python" -m venv "$venv"
  "$venv/bin/pip" install -q --upgrade pip
  "$venv/bin/pip" install -q -r "$root/requirements.txt"
  "$venv/bin/python" -c "import torch; print('setup: torch', torch.__version__)"
  cp "$root/requirements.txt" "$stamp"
fi

# The report's packages (matplotlib; scipy for Google Benchmark's compare.py) go into the same
# environment, with their own stamp: a copy of requirements-report.txt, so changing that file
# reinstalls them without touching torch (requirements.txt alone names the environment).
report_stamp="$venv/.graphopt-report-ready"
if ! cmp -s "$root/requirements-report.txt" "$report_stamp"; then
  echo "setup: installing the report's Python packages (requirements-report.txt)"
  "$venv/bin/pip" install -q -r "$root/requirements-report.txt"
  "$venv/bin/python" -c "import matplotlib; print('setup: matplotlib', matplotlib.__version__)"
  cp "$root/requirements-report.txt" "$report_stamp"
fi

# Test-only Python packages (pytest for python/tests), with their own stamp as above.
test_stamp="$venv/.graphopt-test-ready"
if ! cmp -s "$root/requirements-test.txt" "$test_stamp"; then
  echo "setup: installing the tests' Python packages (requirements-test.txt)"
  "$venv/bin/pip" install -q -r "$root/requirements-test.txt"
  cp "$root/requirements-test.txt" "$test_stamp"
fi
