#!/usr/bin/env python3
"""Checks that no #include runs from a lower layer of graph-opt to a higher one
(docs/Building.md, "Layers"): each folder below is one layer, built into the libraries named,
and a file may include headers of its own folder and of folders in lower layers only.
tools/ and python/ may include everything under them but not each other.

    scripts/check-layers.py [ROOT]      exit 1 and one line per include that breaks a layer
"""
import pathlib
import re
import sys

# layer: (folders, the library or program they are built into). A folder's headers are
# include/graphopt/<Folder>/ and its sources lib/<Folder>/; passes/ and tools/ as they are.
LAYERS = [
    (["Support"], "graphopt_support"),
    (["IR"], "graphopt_ir"),
    (["Import", "Alias"], "graphopt_import, graphopt_alias"),
    (["Export", "Runtime"], "graphopt_export, graphopt_runtime"),
    (["Pass"], "graphopt_pass"),
    (["Analysis"], "graphopt_analysis"),
    (["Cost"], "graphopt_cost"),
    (["passes"], "graphopt_passes"),
    (["Testing", "Driver"], "graphopt_testing, graphopt_pass_property, graphopt_driver"),
    (["tools", "python"], "the programs and the Python module"),
]
LEVEL = {folder: level for level, (folders, _) in enumerate(LAYERS) for folder in folders}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def folder_of(root, path):
    """The layer folder a source or header file belongs to, or None (tests, benchmarks)."""
    rel = path.relative_to(root).parts
    if rel[0] in ("include",) and len(rel) > 2 and rel[1] == "graphopt":
        return rel[2]
    if rel[0] == "lib" and len(rel) > 1:
        return rel[1]
    if rel[0] in ("passes", "tools", "python"):
        return rel[0]
    return None


def included_folder(root, including, name):
    """The layer folder of an #include "name" in file `including`, or None (a system or
    third-party header, or one beside the including file that is in no layer)."""
    parts = pathlib.PurePosixPath(name).parts
    if parts[0] == "graphopt" and len(parts) > 2:
        return parts[1]
    beside = including.parent / name
    for base in (including.parent, root / "passes", root / "tools" / "graph-opt"):
        candidate = base / name
        if candidate.exists():
            return folder_of(root, candidate.resolve())
    return folder_of(root, beside) if beside.exists() else None


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    broken = []
    for top in ("include", "lib", "passes", "tools", "python"):
        for path in sorted((root / top).rglob("*")):
            if path.suffix not in (".h", ".cpp") or "build" in path.relative_to(root).parts:
                continue
            mine = folder_of(root, path)
            if mine not in LEVEL:
                continue
            for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                theirs = included_folder(root, path, m.group(1))
                if theirs is None or theirs not in LEVEL or theirs == mine:
                    continue
                if LEVEL[theirs] >= LEVEL[mine]:
                    broken.append(f"{path.relative_to(root)}:{number}: {mine} (layer "
                                  f"{LEVEL[mine]}) includes {m.group(1)} ({theirs}, layer "
                                  f"{LEVEL[theirs]})")
    for line in broken:
        print(line)
    if broken:
        print(f"check-layers: {len(broken)} include(s) from a lower layer to a higher one or "
              "across one layer (scripts/check-layers.py lists the layers)", file=sys.stderr)
        return 1
    print("check-layers: every include runs to its own folder or a lower layer")
    return 0


if __name__ == "__main__":
    sys.exit(main())
