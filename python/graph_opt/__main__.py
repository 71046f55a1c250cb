"""python -m graph_opt export package.module:factory -o OUT.pt2: a user's model to the .pt2
graph-opt reads (graph_opt/export.py, docs/Importing.md)."""
import sys

from . import export

COMMANDS = {"export": export.main}

if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
    print("usage: python -m graph_opt export package.module:factory -o OUT.pt2 [--eval] "
          "[--decompose-backward] [--untie]", file=sys.stderr)
    sys.exit(2)
sys.exit(COMMANDS[sys.argv[1]](sys.argv[2:]))
