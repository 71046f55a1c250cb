#!/usr/bin/env python3
"""Write broken model files for graph-opt's importer error tests.

    make_bad_inputs.py --from ZOO/mlp-train.pt2 -o OUTDIR

Each file below must make ``graph-opt FILE`` fail with exit code 2 and a clear message
(lib/Import/Pt2Importer.cpp, lib/Import/TorchScriptImporter.cpp). The .pt2 ones are derived
from a good archive written by tools/export/export_model.py (``--from``); the rewritten
ones keep every other record and the archive's single top-level folder, stored
uncompressed like torch.export.save's own records.

    not-a-zip.pt2          a text file
    truncated.pt2          the first 40% of the good archive's bytes
    corrupt.pt2            the good archive with its zip central directory overwritten
    no-model-json.pt2      without models/model.json
    unknown-operator.pt2   one node's target changed to torch.ops.aten.frobnicate.default
    schema-version.pt2     schema_version.major set to 99
    weight-size.pt2        the record data/weights/weight_0 cut to half its bytes
    missing-weight.pt2     one entry removed from data/weights/model_weights_config.json
    invalid-json.pt2       models/model.json replaced by "{not json"
    schema-minor.pt2       schema_version.minor set to a string
    weight-overflow.pt2    a raw weight whose sizes' byte count overflows int64 (2^61 f32)
    weight-negative-stride.pt2  a raw weight with stride -1
    pickle-raw.pt2         a raw weight record marked use_pickle: true
    symbolic-null.pt2      a graph tensor's first size null
    symbolic-empty.pt2     a graph tensor's first size {}
    graph-negative-size.pt2  a graph tensor's first size -3
    float-size.pt2         a graph tensor's first size 6.1e89 (a float where the schema has an int)
    deep-argument.pt2      a node input nested 50,000 levels deep (maps of arguments)
    record-size-lie.pt2    models/model.json deflated, declaring 3.75 GB uncompressed
    input-spec-unknown.pt2   an input spec whose only key is not one of InputSpec's ("parameterr")
    meta-no-requires-grad.pt2  a weight's tensor_meta without requires_grad
    stray-record.pt2       a record outside the archive's top folder
    no-forward.pt          a TorchScript module without a forward method
    control-flow.pt        a scripted module with a data-dependent `if`
                           (extra file graphopt/input_types = "f32[4]")
    not-torchscript.pt     torch.save of a state dict, not a TorchScript archive

Every file is written atomically (a temporary file in OUTDIR, then a rename). When every
file exists and OUTDIR is newer than both this script and the source archive, nothing is
rewritten and "cached" is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import sys
import tempfile
import zipfile

PT2_FILES = [
    "not-a-zip.pt2",
    "truncated.pt2",
    "corrupt.pt2",
    "no-model-json.pt2",
    "unknown-operator.pt2",
    "schema-version.pt2",
    "weight-size.pt2",
    "missing-weight.pt2",
    "invalid-json.pt2",
    "schema-minor.pt2",
    "weight-overflow.pt2",
    "weight-negative-stride.pt2",
    "pickle-raw.pt2",
    "symbolic-null.pt2",
    "symbolic-empty.pt2",
    "graph-negative-size.pt2",
    "float-size.pt2",
    "deep-argument.pt2",
    "record-size-lie.pt2",
    "input-spec-unknown.pt2",
    "meta-no-requires-grad.pt2",
    "stray-record.pt2",
    "wrong-declared-strides.pt2",
    "wrong-declared-sizes.pt2",
]
PT_FILES = ["no-forward.pt", "control-flow.pt", "not-torchscript.pt"]
ALL_FILES = PT2_FILES + PT_FILES

UNKNOWN_TARGET = "torch.ops.aten.frobnicate.default"
INPUT_TYPES_FILE = "graphopt/input_types"


class BadSource(Exception):
    """The --from archive is not what this script expects."""


# --------------------------------------------------------------------------------------
# Zip helpers
# --------------------------------------------------------------------------------------


def central_directory_span(data: bytes) -> tuple[int, int]:
    """(offset, size) of the zip central directory, ZIP64 aware."""
    eocd = data.rfind(b"PK\x05\x06")
    if eocd < 0 or len(data) - eocd < 22:
        raise BadSource("no zip end-of-central-directory record")
    cd_size, cd_offset = struct.unpack_from("<II", data, eocd + 12)
    if cd_size == 0xFFFFFFFF or cd_offset == 0xFFFFFFFF:
        locator = eocd - 20
        if locator < 0 or data[locator:locator + 4] != b"PK\x06\x07":
            raise BadSource("ZIP64 sizes without a ZIP64 end-of-central-directory locator")
        (zip64_eocd,) = struct.unpack_from("<Q", data, locator + 8)
        if data[zip64_eocd:zip64_eocd + 4] != b"PK\x06\x06":
            raise BadSource("ZIP64 locator does not point at a ZIP64 end record")
        cd_size, cd_offset = struct.unpack_from("<QQ", data, zip64_eocd + 40)
    if data[cd_offset:cd_offset + 4] != b"PK\x01\x02" or cd_size == 0:
        raise BadSource("the central directory is not where the end record says")
    return cd_offset, cd_size


def read_archive(path: str) -> tuple[str, list[tuple[str, bytes]]]:
    """(root folder with '/', [(name relative to root, bytes)] in archive order)."""
    with zipfile.ZipFile(path) as z:
        infos = z.infolist()
        if not infos:
            raise BadSource("the archive is empty")
        root = infos[0].filename.split("/", 1)[0] + "/"
        records = []
        for info in infos:
            if not info.filename.startswith(root):
                raise BadSource(f"record {info.filename} is outside the top folder {root}")
            records.append((info.filename[len(root):], z.read(info)))
    return root, records


def zip_bytes(root: str, records: list[tuple[str, bytes]]) -> bytes:
    """A stored (uncompressed) zip of the records under root, deterministic timestamps."""
    import io

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as z:
        for name, data in records:
            info = zipfile.ZipInfo(root + name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_STORED
            z.writestr(info, data)
    return buf.getvalue()


def with_declared_size(data: bytes, name: str, size: int) -> bytes:
    """The archive `data` with record `name` declaring `size` uncompressed bytes
    (in its central directory entry and its local header)."""
    out = bytearray(data)
    cd_offset, cd_size = central_directory_span(data)
    at = cd_offset
    while at < cd_offset + cd_size:
        name_len, extra_len, comment_len = struct.unpack_from("<HHH", data, at + 28)
        if data[at + 46:at + 46 + name_len].decode() == name:
            (local,) = struct.unpack_from("<I", data, at + 42)
            struct.pack_into("<I", out, at + 24, size)
            struct.pack_into("<I", out, local + 22, size)
            return bytes(out)
        at += 46 + name_len + extra_len + comment_len
    raise BadSource(f"the archive has no record {name}")


def record_index(records, name: str) -> int:
    for i, (n, _) in enumerate(records):
        if n == name:
            return i
    raise BadSource(f"the source archive has no record {name}")


# --------------------------------------------------------------------------------------
# The broken inputs
# --------------------------------------------------------------------------------------


def make_pt2(src: str) -> dict[str, bytes]:
    with open(src, "rb") as f:
        good = f.read()
    root, records = read_archive(src)
    model_json = "models/model.json"
    weights_config = "data/weights/model_weights_config.json"
    doc = json.loads(records[record_index(records, model_json)][1])

    def with_record(name, data):
        out = list(records)
        out[record_index(out, name)] = (name, data)
        return zip_bytes(root, out)

    def with_model(mutate):
        d = json.loads(json.dumps(doc))
        mutate(d)
        return with_record(model_json, json.dumps(d).encode())

    files: dict[str, bytes] = {}
    files["not-a-zip.pt2"] = (
        b"This is a text file, not a zip archive.\n"
        b"graph-opt must refuse it as a .pt2 archive.\n"
    )
    files["truncated.pt2"] = good[: len(good) * 40 // 100]

    cd_offset, cd_size = central_directory_span(good)
    pattern = b"GARBAGE!"
    garbage = (pattern * (cd_size // len(pattern) + 1))[:cd_size]
    files["corrupt.pt2"] = good[:cd_offset] + garbage + good[cd_offset + cd_size:]

    record_index(records, model_json)  # must exist before it can be left out
    files["no-model-json.pt2"] = zip_bytes(root, [r for r in records if r[0] != model_json])

    def unknown_operator(d):
        nodes = d["graph_module"]["graph"]["nodes"]
        for node in nodes:
            if node["target"].startswith("torch.ops.aten."):
                node["target"] = UNKNOWN_TARGET
                return
        raise BadSource("model.json has no aten node to rename")

    files["unknown-operator.pt2"] = with_model(unknown_operator)
    files["schema-version.pt2"] = with_model(
        lambda d: d["schema_version"].__setitem__("major", 99))

    weight = "data/weights/weight_0"
    data = records[record_index(records, weight)][1]
    if len(data) < 2:
        raise BadSource(f"{weight} is too small to cut in half")
    files["weight-size.pt2"] = with_record(weight, data[: len(data) // 2])

    config = json.loads(records[record_index(records, weights_config)][1])
    entries = config.get("config", {})
    if not entries:
        raise BadSource(f"{weights_config} has no entries")
    dropped = sorted(entries)[0]
    del entries[dropped]
    files["missing-weight.pt2"] = with_record(weights_config, json.dumps(config).encode())

    files["invalid-json.pt2"] = with_record(model_json, b"{not json")

    files["schema-minor.pt2"] = with_model(
        lambda d: d["schema_version"].__setitem__("minor", "seventeen"))

    def with_config_entry(mutate):
        c = json.loads(records[record_index(records, weights_config)][1])
        entries = c.get("config", {})
        if not entries:
            raise BadSource(f"{weights_config} has no entries")
        mutate(entries[sorted(entries)[0]])
        return with_record(weights_config, json.dumps(c).encode())

    def overflow(entry):
        meta = entry["tensor_meta"]
        meta["sizes"] = [{"as_int": 2 ** 61}]
        meta["strides"] = [{"as_int": 1}]

    files["weight-overflow.pt2"] = with_config_entry(overflow)
    files["weight-negative-stride.pt2"] = with_config_entry(
        lambda e: e["tensor_meta"]["strides"][0].__setitem__("as_int", -1))
    files["pickle-raw.pt2"] = with_config_entry(lambda e: e.__setitem__("use_pickle", True))

    def first_size(value):
        def mutate(d):
            values = d["graph_module"]["graph"]["tensor_values"]
            for meta in values.values():
                if meta["sizes"]:
                    meta["sizes"][0] = value
                    return
            raise BadSource("model.json has no tensor with a size")
        return mutate

    # A read result declared with strides its kernel does not make (the
    # transposed weight of the first linear layer declared contiguous): only
    # the layout differs, so the import takes the kernel's layout, says so,
    # and the graph runs and verifies.
    def contiguous_permute(d):
        values = d["graph_module"]["graph"]["tensor_values"]
        meta = values.get("permute")
        if meta is None or len(meta["strides"]) != 2:
            raise BadSource("model.json has no two-dimensional tensor 'permute'")
        rows = meta["sizes"][1]["as_int"]
        meta["strides"] = [{"as_int": rows}, {"as_int": 1}]

    files["wrong-declared-strides.pt2"] = with_model(contiguous_permute)

    # A read result declared with sizes its kernel does not make (the same
    # transposed weight declared with half its columns): its reader was typed
    # from them, so the import records the conflict and passes refuse the graph.
    def halved_permute(d):
        values = d["graph_module"]["graph"]["tensor_values"]
        meta = values.get("permute")
        if meta is None or len(meta["sizes"]) != 2:
            raise BadSource("model.json has no two-dimensional tensor 'permute'")
        half = meta["sizes"][1]["as_int"] // 2
        meta["sizes"][1] = {"as_int": half}
        meta["strides"] = [{"as_int": half}, {"as_int": 1}]

    files["wrong-declared-sizes.pt2"] = with_model(halved_permute)

    files["symbolic-null.pt2"] = with_model(first_size(None))
    files["symbolic-empty.pt2"] = with_model(first_size({}))
    files["graph-negative-size.pt2"] = with_model(first_size({"as_int": -3}))
    # A float where the schema has an integer: nlohmann casts it, undefined
    # behaviour when it does not fit (found by fuzz-pt2-import).
    files["float-size.pt2"] = with_model(first_size({"as_int": 6.1e89}))

    # An argument nested 50,000 levels deep (maps of arguments): LibTorch's
    # serde types read it recursively and would overflow the stack.
    def deep_argument():
        d = json.loads(json.dumps(doc))
        node = next((n for n in d["graph_module"]["graph"]["nodes"] if n["inputs"]), None)
        if node is None:
            raise BadSource("model.json has no node with an input")
        node["inputs"][0]["arg"] = "DEEP"
        depth = 50000
        deep = ('{"as_string_to_argument": {"k": ' * depth + '{"as_none": true}' +
                "}}" * depth)
        return with_record(model_json, json.dumps(d).replace('"DEEP"', deep, 1).encode())

    files["deep-argument.pt2"] = deep_argument()

    # The model JSON deflated, its header declaring 3.75 GB: LibTorch's zip
    # reader would allocate that before inflating anything.
    import io
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in records:
            info = zipfile.ZipInfo(root + name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED if name == model_json else zipfile.ZIP_STORED
            z.writestr(info, data)
    files["record-size-lie.pt2"] = with_declared_size(buf.getvalue(), root + model_json, 0xF0000000)

    def unknown_spec(d):
        specs = d["graph_module"]["signature"]["input_specs"]
        if not specs:
            raise BadSource("model.json has no input specs")
        (kind, value), = specs[0].items()
        specs[0] = {kind + "r": value}

    files["input-spec-unknown.pt2"] = with_model(unknown_spec)
    files["meta-no-requires-grad.pt2"] = with_config_entry(
        lambda e: e["tensor_meta"].pop("requires_grad"))
    import io
    buf = io.BytesIO(zip_bytes(root, records))
    with zipfile.ZipFile(buf, "a", compression=zipfile.ZIP_STORED) as z:
        z.writestr(zipfile.ZipInfo("stray.txt", date_time=(1980, 1, 1, 0, 0, 0)), b"outside")
    files["stray-record.pt2"] = buf.getvalue()
    return files


def make_pt(tmp_dir: str) -> dict[str, str]:
    """Writes the .pt files into tmp_dir under their final names; returns name -> path."""
    import torch

    paths = {name: os.path.join(tmp_dir, name) for name in PT_FILES}

    class NoForward(torch.jit.ScriptModule):
        """A ScriptModule whose only method is `helper`: no forward."""

        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.ones(4))

        @torch.jit.script_method
        def helper(self, x):
            return x * self.weight

    torch.jit.save(NoForward(), paths["no-forward.pt"])
    loaded = torch.jit.load(paths["no-forward.pt"])
    if loaded._c._has_method("forward"):
        raise RuntimeError("no-forward.pt: the loaded module has a forward method")

    class ControlFlow(torch.nn.Module):
        def forward(self, x):
            if x.sum() > 0:
                return x * 2
            return x - 1

    torch.jit.save(torch.jit.script(ControlFlow()), paths["control-flow.pt"],
                   _extra_files={INPUT_TYPES_FILE: "f32[4]"})
    extra = {INPUT_TYPES_FILE: ""}
    loaded = torch.jit.load(paths["control-flow.pt"], _extra_files=extra)
    if "prim::If" not in str(loaded.graph) or extra[INPUT_TYPES_FILE] not in (b"f32[4]", "f32[4]"):
        raise RuntimeError("control-flow.pt: no prim::If, or the input types did not save")

    torch.save({"weight": torch.ones(4, 4), "bias": torch.zeros(4)}, paths["not-torchscript.pt"])
    try:
        torch.jit.load(paths["not-torchscript.pt"])
    except Exception:
        pass
    else:
        raise RuntimeError("not-torchscript.pt: torch.jit.load accepts it")
    return paths


# --------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------


def up_to_date(out_dir: str, sources: list[str]) -> bool:
    if not all(os.path.isfile(os.path.join(out_dir, f)) for f in ALL_FILES):
        return False
    mtime = os.stat(out_dir).st_mtime_ns
    return all(mtime > os.stat(s).st_mtime_ns for s in sources)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog="make_bad_inputs.py",
        description="Write broken .pt2 / .pt files for graph-opt's importer error tests.",
    )
    p.add_argument("--from", dest="source", metavar="GOOD.pt2",
                   help="a good archive from export_model.py (e.g. ZOO/mlp-train.pt2)")
    p.add_argument("-o", "--out-dir", required=True, help="directory for the broken files")
    p.add_argument("--force", action="store_true", help="rewrite even when up to date")
    args = p.parse_args(argv)

    def fail(msg: str) -> int:
        print(f"make_bad_inputs.py: error: {msg}", file=sys.stderr)
        return 2

    if not args.source:
        return fail("--from GOOD.pt2 is required (an archive from tools/export, e.g. "
                    "ZOO/mlp-train.pt2)")
    if not os.path.isfile(args.source):
        return fail(f"--from {args.source}: no such file (export the zoo first: "
                    f"tools/export/export_zoo.py -o ZOO)")
    out_dir = args.out_dir
    script = os.path.abspath(__file__)
    if not args.force and os.path.isdir(out_dir) and up_to_date(out_dir, [script, args.source]):
        print(f"cached: {out_dir}")
        return 0

    try:
        pt2 = make_pt2(args.source)
    except (BadSource, zipfile.BadZipFile, ValueError, KeyError) as e:
        return fail(f"--from {args.source}: not a usable torch.export archive: "
                    f"{type(e).__name__}: {e}")

    os.makedirs(out_dir, exist_ok=True)
    tmp_dir = tempfile.mkdtemp(prefix=".tmp-", dir=out_dir)
    try:
        for name, data in pt2.items():
            with open(os.path.join(tmp_dir, name), "wb") as f:
                f.write(data)
        make_pt(tmp_dir)
        for name in ALL_FILES:
            os.replace(os.path.join(tmp_dir, name), os.path.join(out_dir, name))
    except Exception as e:
        return fail(f"writing the broken inputs failed: {type(e).__name__}: {e}")
    finally:
        shutil.rmtree(tmp_dir, ignore_errors=True)
    os.utime(out_dir)  # newer than the script and the source from now on
    for name in ALL_FILES:
        print(f"{os.path.join(out_dir, name)} ({os.path.getsize(os.path.join(out_dir, name))} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
