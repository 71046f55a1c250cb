"""Where graph_opt.auto_checkpoint puts its checkpoints (python/graph_opt/eager.py): the
regions of a model that run under torch.utils.checkpoint for a checkpoint plan of its
exported step, and which forward operators each region saves.

A checkpoint recomputes its whole region at backward's first use of anything in it and holds
the region's inputs until then, so a region must be small (every recomputed activation of it
is live at once during its recomputation) and hold what the plan drops together with where
it is read (a module outside that reads a recomputed activation saves it for its own
backward), with inputs the plan keeps anyway. Per recomputed activation, the region is the
smallest module that holds the operator making it and every forward operator reading it
(their nodes' module paths in the export), or the run of a Sequential's children that does
(nn.Sequential's own forward chains them, so a run can be cut out of it); a ModuleList or
ModuleDict only holds its modules, so the module that calls them is taken. A region grows
while an input of it is a value the plan does not keep (a ReLU alone would hold the batch
norm output it is made from, as large as what it drops), but never to the model itself or
to a module running more than half of the step's forward operators: a checkpoint of the
whole step would recompute all of forward at once (measured: a higher peak than no plan),
and an activation that only such a region could hold stays saved. Regions inside another
are merged into it.
"""
import collections
import re

import torch

_HOLDERS = (torch.nn.ModuleList, torch.nn.ModuleDict)


def op_key(name):
    """aten::relu_ and aten::relu.default alike: the functional operator's name."""
    name = name.split(".", 1)[0]
    return name[:-1] if name.endswith("_") and not name.endswith("__") else name


def module_path(node):
    """The module path of an exported node ("" where the model's own forward makes it)."""
    module = node["attributes"].get("module")
    return module.strip('"') if isinstance(module, str) else ""


def repeated_blocks(root):
    """The model's blocks: (qualified name, module) for every child of an nn.ModuleList or
    nn.Sequential that has at least two children of its class having submodules (ResNet's
    Bottleneck in layer1..4, a transformer's decoder layers, the blocks of a residual MLP).
    A block's own submodules are not searched. Each under a checkpoint of its own is
    per-block checkpointing: auto_checkpoint's last candidate, and the benchmarks' peer."""
    blocks = []

    def visit(module, prefix):
        for name, child in module.named_children():
            path = f"{prefix}.{name}" if prefix else name
            repeated = set()
            if isinstance(child, (torch.nn.ModuleList, torch.nn.Sequential)):
                counts = collections.Counter(type(c) for c in child.children()
                                             if next(c.children(), None) is not None)
                repeated = {cls for cls, n in counts.items() if n >= 2}
            if not repeated:
                visit(child, path)
                continue
            for kname, k in child.named_children():
                if type(k) in repeated:
                    blocks.append((f"{path}.{kname}", k))
                else:
                    visit(k, f"{path}.{kname}")

    visit(root, "")
    return blocks


def _parts(path):
    return path.split(".") if path else []


def _is_chain(module):
    """A Sequential that runs its children with nn.Sequential's own forward."""
    return isinstance(module, torch.nn.Sequential) and \
        type(module).forward is torch.nn.Sequential.forward and "forward" not in module.__dict__


class Region:
    """A part of the model run under one checkpoint: the module at `path` (`span` None), or
    the children span[0]..span[1] of the Sequential at `path`; `nodes` are its forward
    operators in the export as [(operator, recomputed?)] (set by regions())."""

    def __init__(self, path, span=None):
        self.path, self.span, self.nodes = path, span, []

    @property
    def key(self):
        """"blocks.2", or "features[1:4]" (a slice of the Sequential's children)."""
        if self.span is None:
            return self.path
        return f"{self.path}[{self.span[0]}:{self.span[1] + 1}]"

    def holds(self, path, modules):
        """Whether an operator of the module at `path` runs inside the region."""
        parts, mine = _parts(path), _parts(self.path)
        if parts[:len(mine)] != mine:
            return False
        if self.span is None:
            return True
        if len(parts) == len(mine):
            return False
        names = list(modules[self.path]._modules)
        child = parts[len(mine)]
        return child in names and self.span[0] <= names.index(child) <= self.span[1]

    def members(self, modules):
        """The paths of the modules the region runs: itself, or its span of children."""
        if self.span is None:
            return [self.path]
        names = list(modules[self.path]._modules)
        return [".".join(_parts(self.path) + [names[i]])
                for i in range(self.span[0], self.span[1] + 1)]

    def within(self, other, modules):
        """Whether this region lies inside `other` (or is it)."""
        return all(other.holds(p, modules) for p in self.members(modules))


def _smallest(paths, modules):
    """The smallest region holding operators of every module path in `paths`, or None
    where only the model itself does."""
    parts = [_parts(p) for p in paths]
    common = []
    for level in zip(*parts):
        if any(p != level[0] for p in level):
            break
        common.append(level[0])
    while True:
        module = modules.get(".".join(common))
        if module is not None and _is_chain(module):
            names = list(module._modules)
            indices = [names.index(p[len(common)]) for p in parts
                       if len(p) > len(common) and p[len(common)] in names]
            span = (min(indices), max(indices)) if indices else (0, len(names) - 1)
            if common or span != (0, len(names) - 1):
                return Region(".".join(common), span)
        elif module is not None and common and not isinstance(module, _HOLDERS):
            return Region(".".join(common))
        if not common:
            return None
        common = common[:-1]


def _simplest(region, modules):
    """A span of one child as that child's own region, of all the children (below the
    model) as the Sequential's."""
    if region.span is None:
        return region
    names = list(modules[region.path]._modules)
    if region.span[0] == region.span[1]:
        return Region(".".join(_parts(region.path) + [names[region.span[0]]]))
    if region.path and region.span == (0, len(names) - 1):
        return Region(region.path)
    return region


DTYPE_BYTES = {"f64": 8, "f32": 4, "f16": 2, "bf16": 2, "i64": 8, "i32": 4, "i16": 2,
               "i8": 1, "u8": 1, "bool": 1, "b8": 1, "c64": 8, "c128": 16}


def type_bytes(text):
    """The bytes of a value of IR type `text` ("f32[64, 16, 32, 32]"); 0 for a non-tensor."""
    match = re.fullmatch(r"\s*([a-z]+\d*)\[([^\]]*)\]\s*", text)
    if match is None:
        return 0
    count = 1
    for size in filter(None, (s.strip() for s in match.group(2).split(","))):
        count *= int(size) if size.isdigit() else 1
    return count * DTYPE_BYTES.get(match.group(1), 4)


def saved_by_plan(node, kept, recomputed):
    """Whether a forward call is saved in its region (selective checkpoint's MUST_SAVE
    caches every output of the call until backward): where the plan recomputes none of
    its outputs and keeps at least as many of its bytes as it leaves (batch norm's
    statistics are kept, but its output, which backward does not read, is the bulk: the
    call is recomputed with it). A value backward never reads is not kept: a region saving it
    would hold what the plan frees after its last forward use."""
    if set(node["outputs"]) & recomputed:
        return False
    kept_bytes = other = 0
    for name, type_text in zip(node["outputs"], node["types"]):
        if name in kept:
            kept_bytes += max(kept[name], 1)
        else:
            other += type_bytes(type_text)
    return kept_bytes > 0 and kept_bytes >= other


def regions(graph, report, model):
    """The regions to run under checkpoint (Region, by key) for the checkpoint pass's
    `report` on `graph`, the exported step of `model` (the module's docstring says how
    they are chosen)."""
    modules = dict(model.named_modules())
    kept = {a["name"]: a["bytes"] for a in report["activations"]
            if a["decision"] != "recomputed"}
    recomputed = {a["name"] for a in report["activations"] if a["decision"] == "recomputed"}
    forward = [n for n in graph.nodes if n["phase"] == "forward" and n["op"].startswith("aten::")]
    paths = [module_path(n) for n in forward]
    made_by = {v: i for i, n in enumerate(forward) for v in n["outputs"]}
    users = {}
    for i, n in enumerate(forward):
        for v in n["operands"]:
            users.setdefault(v, []).append(i)

    def inside(region):
        return [j for j in range(len(forward)) if region.holds(paths[j], modules)]

    def small_enough(region):
        """The region, unless it holds more than half the step's forward operators: a
        checkpoint recomputes all it drops at once, so a region holding most of the step
        would have most of what the plan drops live together in backward."""
        return region if region is not None and 2 * len(inside(region)) <= len(forward) \
            else None

    found = []
    for i, n in enumerate(forward):
        for v in set(n["outputs"]) & recomputed:
            held = {paths[i]} | {paths[u] for u in users.get(v, ())}
            region = small_enough(_smallest(held, modules))
            while region is not None:  # grow while an input is not kept
                outside = {paths[made_by[v]] for j in inside(region) for v in forward[j]["operands"]
                           if v in made_by and v not in kept
                           and not region.holds(paths[made_by[v]], modules)}
                larger = small_enough(_smallest(held | outside, modules)) if outside else None
                if larger is None:
                    break  # (none, or too large: the region holds that input instead)
                held |= outside
                region = larger
            if region is not None:
                found.append(region)

    merged = True  # regions inside another, and overlapping runs of one Sequential, merged
    while merged:
        merged = False
        out = []
        for region in sorted(found, key=lambda r: (len(_parts(r.path)), r.span or (0, 0))):
            for other in out:
                if region.within(other, modules):
                    break
                if region.span and other.span and region.path == other.path and \
                        region.span[0] <= other.span[1] and other.span[0] <= region.span[1]:
                    other.span = (min(region.span[0], other.span[0]),
                                  max(region.span[1], other.span[1]))
                    merged = True
                    break
            else:
                out.append(region)
        found = out
    result = []
    for region in found:
        region = _simplest(region, modules)
        region.nodes = [(op_key(n["op"]), not saved_by_plan(n, kept, recomputed))
                        for n, p in zip(forward, paths) if region.holds(p, modules)]
        result.append(region)
    return sorted(result, key=lambda r: r.key)
