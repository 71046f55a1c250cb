#!/usr/bin/env python3
"""Export several zoo models (default: all, both modes, --tiny) into one directory.

Writes DIR/<model>-<mode>.pt2 and DIR/<model>-<mode>.facts.json for each; the training step
without dropout (export_model.py --no-dropout: no random op in the graph, for comparisons
with eager PyTorch) as DIR/<model>-train-nodrop.pt2 and DIR/<model>-train-nodrop.facts.json
for each model of --nodrop (default: the text models with dropout: bert, bert-mlm, gpt2,
t5); and TorchScript modules (eval only): DIR/<model>-eval.pt (traced) with
DIR/<model>-eval-ts.facts.json for each model of --torchscript, DIR/<model>-scripted.pt
(torch.jit.script) with DIR/<model>-scripted-ts.facts.json for each model of --scripted.
Prints one line per export with its node count and time, and exits 1 if any export failed.

An export is skipped ("cached") when its archive and facts file exist and the stamp
DIR/.stamps/<archive name>.sha256 holds the same fingerprint: the sha256 of
export_model.py's, the model zoo's (tools/zoo/*.py) and python/graph_opt/export.py's bytes,
the torch, torchvision and transformers versions and the exact export_model.py argument list.
The stamp is written only after a successful export; --force ignores the stamps.

    export_zoo.py -o build/zoo                       # every model, both modes, tiny
    export_zoo.py -o /tmp/big --full --models resnet50,gpt2 --modes train --torchscript '' \
        --scripted '' --nodrop ''
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_model  # noqa: E402
import zoo  # noqa: E402  (tools/zoo, on the path since export_model imports it)

STAMP_DIR = ".stamps"


def _versions() -> str:
    """The installed torch, torchvision and transformers versions (without importing them,
    which would take seconds on a run where every export is cached)."""
    from importlib import metadata

    parts = []
    for name in ("torch", "torchvision", "transformers"):
        try:
            parts.append(f"{name}={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            parts.append(f"{name}=missing")
    return ";".join(parts)


# The exporter's sources: export_model.py, the model zoo it builds the models with
# (tools/zoo) and the package code it exports with (python/graph_opt/export.py), read from
# the source tree.
EXPORTER_SOURCES = [
    export_model.__file__,
    *zoo.SOURCES,
    os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                 "python", "graph_opt", "export.py"),
]


def fingerprint(argv_one: list[str], versions: str) -> str:
    h = hashlib.sha256()
    for source in EXPORTER_SOURCES:
        with open(source, "rb") as f:
            h.update(f.read())
    h.update(b"\0" + versions.encode() + b"\0")
    h.update(json.dumps(argv_one).encode())
    return h.hexdigest()


def stamp_path(out_dir: str, archive: str) -> str:
    return os.path.join(out_dir, STAMP_DIR, os.path.basename(archive) + ".sha256")


def is_fresh(out_dir: str, archive: str, facts: str, fp: str) -> bool:
    if not (os.path.isfile(archive) and os.path.isfile(facts)):
        return False
    try:
        with open(stamp_path(out_dir, archive)) as f:
            return f.read().strip() == fp
    except OSError:
        return False


def write_stamp(out_dir: str, archive: str, fp: str) -> None:
    path = stamp_path(out_dir, archive)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".stamp-", dir=os.path.dirname(path))
    with os.fdopen(fd, "w") as f:
        f.write(fp + "\n")
    os.replace(tmp, path)


def remove_stamp(out_dir: str, archive: str) -> None:
    try:
        os.unlink(stamp_path(out_dir, archive))
    except FileNotFoundError:
        pass


def _run_jobs(jobs, settings):
    """Exports `jobs` in order in this process: per job (the line to print, whether it failed,
    whether its archive was fresh already)."""
    out_dir, full, force, versions = settings
    results = []
    for model, form, out, argv_one in jobs:
        argv_one = argv_one + ["-q"] + ([] if full else ["--tiny"])
        facts_path = export_model.facts_path_for(out)
        fp = fingerprint(argv_one, versions)
        fresh = not force and is_fresh(out_dir, out, facts_path, fp)
        if not fresh:
            remove_stamp(out_dir, out)  # a half-done export must not look fresh
            start = time.perf_counter()
            rc = export_model.main(argv_one)
            total = time.perf_counter() - start
            if rc != 0:
                results.append((f"{model:<10} {form:<6} FAILED (exit {rc}) after {total:.1f}s",
                                True, False))
                continue
        try:
            with open(facts_path) as f:
                facts = json.load(f)
        except (OSError, ValueError) as e:
            results.append((f"{model:<10} {form:<6} FAILED: cannot read {facts_path}: {e}",
                            True, False))
            continue
        if not fresh:
            write_stamp(out_dir, out, fp)
        if facts.get("format") == "torchscript":
            nodes, ops, params = "-", "-", len(facts["parameters"])
        else:
            nodes, ops, params = facts["num_nodes"], facts["num_op_nodes"], facts["num_parameters"]
        if fresh:
            timing = f"{'cached':>8} {'':>8}"
        else:
            timing = f"{facts['export_seconds']:>8.2f} {total:>8.2f}"
        size_mb = os.path.getsize(out) / 2**20
        results.append((f"{model:<10} {form:<6} {nodes:>6} {ops:>6} {params:>6} {timing}"
                        f"  {out} ({size_mb:.1f} MiB)", False, fresh))
    return results


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="export_zoo.py", description=__doc__.splitlines()[0])
    p.add_argument("-o", "--out-dir", required=True, help="directory for the archives")
    p.add_argument("--models", default=",".join(zoo.MODELS),
                   help="comma-separated model names for .pt2 exports (default: all)")
    p.add_argument("--modes", default="eval,train", help="comma-separated: eval,train")
    p.add_argument("--torchscript", default="mlp,cnn,resnet18",
                   help="comma-separated models to also export as traced TorchScript, "
                   "DIR/<model>-eval.pt (default: mlp,cnn,resnet18; '' for none)")
    p.add_argument("--scripted", default="mlp,cnn",
                   help="comma-separated models to also export with torch.jit.script, "
                   "DIR/<model>-scripted.pt (default: mlp,cnn; '' for none)")
    p.add_argument("--nodrop", default="bert,bert-mlm,gpt2,t5",
                   help="comma-separated models to also export in train mode with "
                   "--no-dropout, DIR/<model>-train-nodrop.pt2 (default: bert,bert-mlm,gpt2,t5; "
                   "'' for none)")
    p.add_argument("--full", action="store_true", help="default sizes instead of --tiny")
    p.add_argument("--force", action="store_true", help="export even where the stamp matches")
    p.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                   help="processes exporting at once (default: 2 where there are two cores)")
    args = p.parse_args(argv)

    def names(text):
        return [m for m in text.split(",") if m]

    models, modes = names(args.models), names(args.modes)
    ts_models, scripted = names(args.torchscript), names(args.scripted)
    nodrop = names(args.nodrop)
    bad = [m for m in models + ts_models + scripted + nodrop if m not in zoo.MODELS]
    bad += [m for m in modes if m not in ("eval", "train")]
    if bad:
        p.error(f"unknown model or mode: {', '.join(dict.fromkeys(bad))}")
    os.makedirs(args.out_dir, exist_ok=True)

    # (model, form, archive path, export_model.py arguments)
    # TorchScript first: after AOTAutograd's joint exports, torch.jit.script of the cnn
    # fails in the same process ("'Tensor' object has no attribute or method '__init__'").
    jobs = []
    for model in ts_models:
        out = os.path.join(args.out_dir, f"{model}-eval.pt")
        jobs.append((model, "trace", out, ["--model", model, "--mode", "eval", "-o", out]))
    for model in scripted:
        out = os.path.join(args.out_dir, f"{model}-scripted.pt")
        jobs.append((model, "script", out,
                     ["--model", model, "--mode", "eval", "--script", "-o", out]))
    for model in models:
        for mode in modes:
            out = os.path.join(args.out_dir, f"{model}-{mode}.pt2")
            jobs.append((model, mode, out, ["--model", model, "--mode", mode, "-o", out]))
    for model in nodrop:
        out = os.path.join(args.out_dir, f"{model}-train-nodrop.pt2")
        jobs.append((model, "nodrop", out,
                     ["--model", model, "--mode", "train", "--no-dropout", "-o", out]))

    versions = _versions()
    start_all = time.perf_counter()
    print(f"{'model':<10} {'form':<6} {'nodes':>6} {'ops':>6} {'params':>6} {'export_s':>8} "
          f"{'total_s':>8}  archive")
    # Two processes where there are two cores (each export is one Python thread): the
    # TorchScript jobs stay first in the first one (see above), the .pt2 exports are shared.
    settings = (args.out_dir, args.full, args.force, versions)
    workers = min(args.jobs, len(jobs))
    if workers > 1:
        scripts = [j for j in jobs if j[1] in ("trace", "script")]
        rest = [j for j in jobs if j[1] not in ("trace", "script")]
        lists = [scripts + rest[0::2], rest[1::2]]
        with multiprocessing.get_context("spawn").Pool(2) as pool:
            done = pool.starmap(_run_jobs, [(part, settings) for part in lists])
        by_job = {id_: r for part, results in zip(lists, done)
                  for id_, r in zip((j[2] for j in part), results)}
        results = [by_job[j[2]] for j in jobs]
    else:
        results = _run_jobs(jobs, settings)
    failures = sum(1 for line, failed, _ in results if failed)
    cached = sum(1 for _, _, was_cached in results if was_cached)
    for line, _, _ in results:
        print(line, flush=True)
    print(f"{len(jobs)} exports: {len(jobs) - failures - cached} exported, {cached} cached, "
          f"{failures} failed; {time.perf_counter() - start_all:.1f}s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
