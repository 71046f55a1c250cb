#!/bin/sh
# with-fork-server.sh LOG GRAPH_OPT CLIENT_DIR SCRIPT [ARG...]: runs SCRIPT (sh) with a graph-opt fork
# server of its own (GRAPH_OPT --fork-server), its client first on PATH, each command the
# server sees logged to LOG; exits with SCRIPT's status (test/graph-opt/fork-server.test).
log=$1 real=$2 clientdir=$3
shift 3
GRAPHOPT_FORK_SERVER="graph-opt-fork-test-$$"
GRAPHOPT_FORK_SERVER_LOG=$log
LLVM_DISABLE_SYMBOLIZATION=1
PATH="$clientdir:$PATH"
export GRAPHOPT_FORK_SERVER GRAPHOPT_FORK_SERVER_LOG LLVM_DISABLE_SYMBOLIZATION PATH
ready="$log.ready"
"$real" --fork-server "$GRAPHOPT_FORK_SERVER" > "$ready" &
server=$!
tries=0
until grep -q ready "$ready" 2>/dev/null; do
  tries=$((tries + 1))
  if [ $tries -gt 600 ]; then echo "the fork server did not start" >&2; kill $server; exit 1; fi
  sleep 0.1
done
sh "$@"
rc=$?
kill $server
exit $rc
