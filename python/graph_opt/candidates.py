"""The partitions a bound chooses among: graph-opt's plans and torch's own (docs/TorchCompile.md,
"Never worse than no budget").

Under peak= or memory_budget= the partitioner never hands torch.compile a partition whose
priced peak (halves.py's prediction, or with predict="inductor" Inductor's own code read) is
above that of torch's own unbudgeted partition: a budget that
makes the step peak higher than no budget at all is pytorch/pytorch#197838's trap, which a
planner exists to avoid. So beside graph-opt's plans, torch's default partition and its
knapsack (activation_memory_budget) are candidates, each priced by the same prediction, and
the choice among them is made on that prediction alone:

- graph-opt's plan where it meets the bound and peaks no higher than torch's default (its
  plans are what the benchmarks show faster at equal peak), and, where it peaks exactly as
  the default does, saves no more than it;
- else the torch partition that meets the bound and peaks highest (recomputes least): its
  default, or its knapsack at the budget equivalent to the bound (equivalent_budget);
- else the least peak reachable (least_reachable): the least of a fixed set of candidates
  and the plans of a search aimed just under that set's least, none of which depends on
  the bound asked for, so every bound no candidate meets gets the same least.
"""
import copy
import dataclasses
import time

import torch
from torch._functorch import config as _functorch_config
from torch._functorch.partitioners import min_cut_rematerialization_partition


TORCH_DEFAULT = "torch"


@dataclasses.dataclass
class Candidate:
    """One partition of a joint graph: `source` ("graph-opt", "torch" for torch's default,
    "knapsack@B"), the forward and backward halves, halves.py's prediction of their peak,
    `work` (the copy of the joint graph it was partitioned from, tagged where graph-opt
    planned it), graph-opt's Plan (None for torch's partitions) and, for torch's, the
    activation_memory_budget it was made at."""
    source: str
    fw: torch.fx.GraphModule
    bw: torch.fx.GraphModule
    halves: dict
    work: torch.fx.GraphModule = None
    plan: object = None
    budget: float = None  # torch's partitions: the activation_memory_budget

    @property
    def peak(self):
        return self.halves["peak_bytes"]

    @property
    def saved_bytes(self):
        return self.halves["saved_bytes"]


def copy_joint(gm):
    """A copy of the joint graph whose nodes' metadata can be changed apart from the
    original's: torch's partitioner rewrites the graph it is given, and a failure must leave
    the original to the fallback."""
    work = torch.fx.GraphModule(gm, copy.deepcopy(gm.graph))
    for old, new in zip(gm.graph.nodes, work.graph.nodes):
        new.meta = dict(old.meta)
    return work


def torch_partition(gm, joint_inputs, kwargs, budget, price):
    """torch's own partition of `gm` at activation_memory_budget=`budget` (1.0: its default,
    as torch.compile partitions without a budget), with its halves' peak as `price(fw, bw,
    num_fwd_outputs)` gives it (the partitioner's: halves.py's prediction, or Inductor's
    code read)."""
    work = copy_joint(gm)
    start = time.perf_counter()
    with _functorch_config.patch(activation_memory_budget=budget):
        fw, bw = min_cut_rematerialization_partition(work, joint_inputs, **kwargs)
    halves = price(fw, bw, kwargs["num_fwd_outputs"])
    halves["partition_seconds"] = time.perf_counter() - start
    source = TORCH_DEFAULT if budget >= 1.0 else f"knapsack@{budget:.3g}"
    return Candidate(source, fw, bw, halves, work, budget=budget)


def equivalent_budget(aim, default):
    """The knapsack's activation_memory_budget whose saved bytes would bring torch's default
    partition `default` to `aim` bytes of peak, one for one (the saved bytes reach the halves'
    peak one for one, as the peak= search assumes): in [0, 1], or None where the default saves
    nothing."""
    saved = default.saved_bytes
    if saved <= 0:
        return None
    return min(1.0, max(0.0, (aim - (default.peak - saved)) / saved))


def recomputed_by(candidate):
    """The joint graph's forward values a partition computes again in backward: graph-opt's
    plan's, or for torch's partitions the forward half's nodes its backward half has too
    (torch's partitioner copies a recomputed node into backward under its own name)."""
    if candidate.plan is not None:
        return set(candidate.plan.recomputed)
    forward = {n.name for n in candidate.fw.graph.nodes if n.op == "call_function"}
    return {n.name for n in candidate.bw.graph.nodes
            if n.op == "call_function" and n.name in forward}


def choose(aim, default, planned, torch_options, fixed):
    """(the candidate chosen, whether it meets `aim`): graph-opt's `planned` (None where its
    search found none within the aim) if it peaks no higher than torch's `default`; else,
    of `torch_options()` (torch's partitions, the default among them), the one within the
    aim that peaks highest (recomputes least; of equals, the one saving most); else, of
    `fixed()` (a set of candidates that does not depend on the bound, the default among
    them), the one within the aim that peaks highest, or failing that the least
    (least_reachable), which is then not within.
    `aim` None: no byte bound (memory_budget=), any candidate no higher than the default
    meets it. The lists are callables: each is made only where the one before failed."""
    def within(c):
        return (aim is None or c.peak <= aim) and c.peak <= default.peak
    # at the default's very peak, a plan that saves more than it does is no lower here and
    # higher wherever what it saves is held (the graphs after it in the step: an RMSNorm's
    # frame saving its 1 MiB product, held through the head's backward)
    if planned is not None and within(planned) and not (
            planned.peak == default.peak and planned.saved_bytes > default.saved_bytes):
        return planned, True
    for options in (torch_options, fixed):
        found = options()
        meeting = [c for c in found if within(c)]
        if meeting:  # the highest peak; of equal peaks, the one saving most
            return max(meeting, key=lambda c: (c.peak, c.saved_bytes)), True
    return least_reachable(found), False


def least_reachable(candidates):
    """The least-peak candidate (of equals, the one saving most: where a peak is set by what
    no plan changes, the end of BERT-base's backward, plans saving 0 and 390 MiB peak alike,
    and the first recomputes far more): what a bound that no candidate meets gets, and what
    a strict refusal names."""
    return min(candidates, key=lambda c: (c.peak, -c.saved_bytes))
