"""What a command sees of its interpreter (test/graph-opt/python-fork-server.test)."""
import atexit
import os
import sys
import tempfile
import threading
import time

import helper  # beside this script: sys.path[0] is the script's directory

print("argv:", " ".join(os.path.basename(a) for a in sys.argv))
print("path0 is the script's directory:", sys.path[0] == os.path.dirname(os.path.realpath(__file__)))
print("PYTHONPATH entry second:", sys.path[1] == os.path.abspath("extra"))
print("cwd:", os.path.basename(os.getcwd()))
print("name:", __name__, "helper:", helper.VALUE)
print("TMPDIR:", os.path.basename(os.environ["TMPDIR"]), os.path.basename(tempfile.gettempdir()))
print("stdout is a pipe, block-buffered:", not sys.stdout.line_buffering)
print("stdin:", sys.stdin.read().strip())
sys.stdout.flush()


def late():
    time.sleep(0.2)
    print("the thread finished before the end")


threading.Thread(target=late).start()
atexit.register(lambda: print("atexit ran"))
print("to stderr", file=sys.stderr)
sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
