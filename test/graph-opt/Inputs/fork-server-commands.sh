# The commands test/graph-opt/fork-server.test runs through a fork server (one line each
# in the server's log), from the directory named by $1.
cd "$1" || exit 1
graph-opt in.gir -S | head -1
graph-opt in.gir -S -o here.gir && test -s here.gir && echo "wrote in the directory: yes"
graph-opt no-such.gir; echo "exit $?"
graph-opt - -S < in.gir | sed -n '1s/^/from stdin: /p'
graph-opt in.gir -passes=test-crash -o crash.gir; rc=$?
[ $rc -gt 128 ] && [ ! -e crash.gir ] && echo "crashed: yes"
OMP_NUM_THREADS=1 graph-opt in.gir -S | sed -n '1s/^/with OMP_NUM_THREADS: /p'
GRAPHOPT_FORK_SERVER= graph-opt in.gir -S | sed -n '1s/^/without a server: /p'
