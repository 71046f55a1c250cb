# The commands test/graph-opt/python-fork-server.test runs through a Python fork server
# (one line each in the server's log), from the directory named by $1; $2, where given, is
# put first on PATH (the client, run without a server).
cd "$1" || exit 1
[ -n "$2" ] && PATH="$2:$PATH"
mkdir -p tmp && echo from-stdin | PYTHONPATH=extra TMPDIR="$PWD/tmp" python show.py 3; echo "exit $?"
python -c 'import sys; print("-c argv:", sys.argv, "path0:", repr(sys.path[0]))' a b
python -m helper_main x; echo "exit $?"
python -c 'raise ValueError("boom")'; echo "exit $?"
python -c 'import sys; sys.exit("a message")'; echo "exit $?"
python -c 'import os; os.kill(os.getpid(), 9)'; echo "exit $?"
python -c 'import torch, sys; print("torch", torch.ones(2).sum().item())'
python -c 'import subprocess, sys; print("child:", subprocess.run([sys.executable, "-c", "print(7)"], capture_output=True, text=True).stdout.strip())'
OMP_NUM_THREADS=1 python -c 'import os; print("with OMP_NUM_THREADS:", os.environ["OMP_NUM_THREADS"])'
python -u -c 'print("with -u")'
