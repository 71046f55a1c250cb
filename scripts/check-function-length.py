#!/usr/bin/env python3
"""Checks that no function of graph-opt's C++ spans more than 80 lines (issue 85: a longer
one is split into named steps). Lengths are lizard's (https://github.com/terryyin/lizard,
pinned in requirements-test.txt): every line from the signature to the closing brace,
comments and blank lines included. Looks at lib/, passes/, tools/, fuzz/, python/bindings/
and include/; unit tests and benchmarks are out of scope.

    scripts/check-function-length.py [ROOT] [--max N]
        exit 1 and one line per function over N lines (default 80): FILE:LINE: NAME, N lines
        exit 0 where there is none; exit 2 where lizard is not installed
"""
import argparse
import pathlib
import sys

FOLDERS = ("lib", "passes", "tools", "fuzz", "python/bindings", "include")
SUFFIXES = (".c", ".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp")
DEFAULT_MAX = 80


def sources(root):
    """The C++ files under FOLDERS, in path order (a build folder inside them left out)."""
    for folder in FOLDERS:
        top = root / folder
        if not top.is_dir():
            continue
        for path in sorted(top.rglob("*")):
            if (path.suffix in SUFFIXES and path.is_file()
                    and "build" not in path.relative_to(root).parts):
                yield path


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", nargs="?", default=".", help="the checkout (default: .)")
    parser.add_argument("--max", type=int, default=DEFAULT_MAX,
                        help="the most lines a function may span (default %(default)s)")
    args = parser.parse_args()
    try:
        import lizard
    except ImportError:
        print("check-function-length: the lizard package is not installed "
              "(pip install -r requirements-test.txt)", file=sys.stderr)
        return 2
    root = pathlib.Path(args.root).resolve()
    long_ones = []
    for path in sources(root):
        for f in lizard.analyze_file(str(path)).function_list:
            if f.length > args.max:
                long_ones.append((path.relative_to(root).as_posix(), f.start_line, f.name,
                                  f.length))
    for file, line, name, length in long_ones:
        print(f"{file}:{line}: {name}, {length} lines")
    if long_ones:
        print(f"check-function-length: {len(long_ones)} function(s) over {args.max} lines; split "
              "each into named steps (docs/Building.md)", file=sys.stderr)
        return 1
    print(f"check-function-length: no function over {args.max} lines in "
          + ", ".join(folder + "/" for folder in FOLDERS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
