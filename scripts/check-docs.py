#!/usr/bin/env python3
"""The docs check (issue 55, `make check-docs`, in `make check`): every shell block in
README.md and docs/*.md runs as written, or says why it does not.

Each fenced block tagged sh, bash, shell or console must follow a marker line:

    <!-- docs-check: run [NAME=SOURCE ...] -->
    <!-- docs-check: skip REASON -->

`run` runs the block in a scratch directory that looks like the checkout (its top-level
entries linked, and build/ with the build tree's entries but demo/), with the build's
programs and the venv of the Python running it first on PATH and the build's graph_opt on PYTHONPATH, under
`bash -euo pipefail`: any command that fails fails the check. NAME=SOURCE gives a file the
block names (model.pt2) an existing one to stand for: SOURCE is zoo/F (the zoo the build
exported), examples/F, or build/F. In a console block (lines starting "$ ") only the
commands run, with their continuation lines; the rest is output. `skip` needs a reason.

    check-docs.py [--build DIR] [--only FILE[:LINE]] [--list] [FILE.md ...]

Exit 0 when every block ran or was skipped with a reason; 1 when one failed or has no
marker (each named by file and line); 2 on bad usage.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHELL_FENCE = re.compile(r"^```(sh|bash|shell|console)\s*$")
MARKER = re.compile(r"^<!--\s*docs-check:\s*(run|skip)\b(.*?)-->\s*$")
TIMEOUT_S = 600


class Block:
    def __init__(self, path, line, kind, text, marker):
        self.path, self.line, self.kind, self.text, self.marker = path, line, kind, text, marker

    @property
    def where(self):
        return f"{os.path.relpath(self.path, ROOT)}:{self.line}"


def blocks_in(path):
    """Every shell block of a Markdown file, with the marker line above it (or None)."""
    lines = open(path, encoding="utf-8").read().split("\n")
    found, i = [], 0
    while i < len(lines):
        fence = SHELL_FENCE.match(lines[i])
        if fence:
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            above = next((lines[k] for k in range(i - 1, -1, -1) if lines[k].strip()), "")
            marker = MARKER.match(above.strip())
            found.append(Block(path, i + 1, fence.group(1), "\n".join(lines[i + 1:j]),
                               (marker.group(1), marker.group(2).strip()) if marker else None))
            i = j
        i += 1
    return found


def commands_of(block):
    """The script a block runs: a console block's "$ " lines with their continuations."""
    if block.kind != "console":
        return block.text
    out, continuing = [], False
    for line in block.text.split("\n"):
        if line.startswith("$ "):
            out.append(line[2:])
            continuing = line.rstrip().endswith("\\")
        elif continuing:
            out.append(line)
            continuing = line.rstrip().endswith("\\")
    return "\n".join(out)


def scratch_checkout(build, zoo):
    """A directory that looks like the checkout for the commands: links to its top-level
    entries, build/ with the build tree's entries (not demo/: blocks map what they read)."""
    work = tempfile.mkdtemp(prefix="graph-opt-docs-")
    for name in os.listdir(ROOT):
        if name not in ("build", ".git") and not name.startswith("build-"):
            os.symlink(os.path.join(ROOT, name), os.path.join(work, name))
    os.mkdir(os.path.join(work, "build"))
    for name in os.listdir(build):
        if name not in ("demo", "zoo"):
            os.symlink(os.path.join(build, name), os.path.join(work, "build", name))
    os.symlink(zoo, os.path.join(work, "build", "zoo"))
    return work


def source_path(source, build, zoo):
    head, _, rest = source.partition("/")
    base = {"zoo": zoo, "examples": os.path.join(ROOT, "examples"), "build": build}.get(head)
    if base is None or not rest:
        raise ValueError(f"{source}: a source is zoo/F, examples/F or build/F")
    path = os.path.join(base, rest)
    if not os.path.exists(path):
        raise ValueError(f"{source}: {path} does not exist")
    return path


def run_block(block, build, zoo, venv):
    """(ok, what it printed, seconds)."""
    work = scratch_checkout(build, zoo)
    try:
        for mapping in block.marker[1].split():
            name, eq, source = mapping.partition("=")
            if not eq or not name or os.path.isabs(name) or ".." in name.split("/"):
                raise ValueError(f"{mapping}: a mapping is NAME=SOURCE, NAME relative")
            target = os.path.join(work, name)
            if os.path.lexists(target):
                raise ValueError(f"{mapping}: {name} is there already")
            os.makedirs(os.path.dirname(target), exist_ok=True)
            os.symlink(source_path(source, build, zoo), target)
        env = dict(os.environ)
        env["PATH"] = os.pathsep.join([os.path.join(build, "bin"), os.path.join(venv, "bin"),
                                       env.get("PATH", "")])
        env["PYTHONPATH"] = os.path.join(build, "python")
        env["GRAPHOPT_ZOO_DIR"] = zoo
        start = time.time()
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", commands_of(block)], cwd=work,
                              env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
        return done.returncode == 0, done.stdout + done.stderr, time.time() - start
    except subprocess.TimeoutExpired:
        return False, f"timed out after {TIMEOUT_S} s", TIMEOUT_S
    except ValueError as e:
        return False, f"docs-check marker: {e}", 0.0
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*", help="Markdown files (default: README.md, docs/*.md)")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--zoo", default=None, help="the zoo (default: BUILD/zoo)")
    ap.add_argument("--only", help="FILE or FILE:LINE: run only those blocks")
    ap.add_argument("--list", action="store_true", help="list the blocks and their markers")
    args = ap.parse_args(argv)
    files = args.files or [os.path.join(ROOT, "README.md")] + sorted(
        os.path.join(ROOT, "docs", f) for f in os.listdir(os.path.join(ROOT, "docs"))
        if f.endswith(".md"))
    build = os.path.abspath(args.build)
    zoo = os.path.abspath(args.zoo or os.path.join(build, "zoo"))
    venv = sys.prefix  # run by the project venv's Python (make check-docs)
    blocks = [b for f in files for b in blocks_in(os.path.abspath(f))]
    if args.only:
        blocks = [b for b in blocks if b.where == args.only or
                  os.path.relpath(b.path, ROOT) == args.only]
        if not blocks:
            print(f"check-docs: no shell block at {args.only}", file=sys.stderr)
            return 2
    failed = []
    for b in blocks:
        if b.marker is None:
            print(f"{b.where}: FAILED: a {b.kind} block with no <!-- docs-check: run|skip --> "
                  f"marker above it")
            failed.append(b)
        elif args.list:
            print(f"{b.where}: {b.marker[0]} {b.marker[1]}")
        elif b.marker[0] == "skip":
            if not b.marker[1]:
                print(f"{b.where}: FAILED: docs-check: skip needs a reason")
                failed.append(b)
            else:
                print(f"{b.where}: skipped: {b.marker[1]}")
        else:
            ok, out, took = run_block(b, build, zoo, venv)
            print(f"{b.where}: {'ok' if ok else 'FAILED'} in {took:.1f} s", flush=True)
            if not ok:
                print("  " + "\n  ".join(out.strip().split("\n")[-30:]))
                failed.append(b)
    ran = sum(1 for b in blocks if b.marker and b.marker[0] == "run")
    print(f"check-docs: {len(blocks)} shell blocks, {ran} run, "
          f"{sum(1 for b in blocks if b.marker and b.marker[0] == 'skip')} skipped with a "
          f"reason, {len(failed)} failed or unmarked")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
