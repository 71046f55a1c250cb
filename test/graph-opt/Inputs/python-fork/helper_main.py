import os
import sys

print("-m argv0:", os.path.basename(sys.argv[0]), "args:", sys.argv[1:], "path0 is cwd:", sys.path[0] == os.getcwd())
sys.exit(4)
