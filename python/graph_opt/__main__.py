"""python -m graph_opt: graph-opt's driver, or its exporter.

    python -m graph_opt IN.pt2 [graph-opt's options]      the driver (graph_opt/driver.py), in
                                                           this process: under torchrun, on the
                                                           ranks' process group
    python -m graph_opt export package.module:factory -o OUT.pt2 [--eval] [--decompose-backward]
                                                           [--untie]: a user's model to the .pt2
                                                           graph-opt reads (graph_opt/export.py)
docs/Python.md, docs/Distributed.md, docs/Importing.md."""
import sys

if len(sys.argv) >= 2 and sys.argv[1] == "export":
    from . import export
    sys.exit(export.main(sys.argv[2:]))

from . import driver  # noqa: E402

sys.exit(driver.main(sys.argv[1:]))
