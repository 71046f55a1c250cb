#!/bin/sh
# with-fork-server.sh LOG VARIABLE CLIENT_DIR SCRIPT DIR SERVER...: runs SCRIPT (sh) with DIR as
# its argument beside a fork server of its own (the command SERVER... and then the server's
# name: `graph-opt --fork-server` or `python python_fork_server.py`), VARIABLE naming it,
# CLIENT_DIR first on PATH and each command the server sees logged to LOG; exits with
# SCRIPT's status (test/graph-opt/fork-server.test, python-fork-server.test).
log=$1 variable=$2 clientdir=$3 script=$4 dir=$5
shift 5
name="fork-test-$$"
GRAPHOPT_FORK_SERVER_LOG=$log
LLVM_DISABLE_SYMBOLIZATION=1
PATH="$clientdir:$PATH"
export "$variable=$name"
export GRAPHOPT_FORK_SERVER_LOG LLVM_DISABLE_SYMBOLIZATION PATH
ready="$log.ready"
"$@" "$name" > "$ready" &
server=$!
tries=0
until grep -q ready "$ready" 2>/dev/null; do
  tries=$((tries + 1))
  if [ $tries -gt 600 ]; then echo "the fork server did not start" >&2; kill $server; exit 1; fi
  sleep 0.1
done
sh "$script" "$dir"
rc=$?
kill $server
exit $rc
