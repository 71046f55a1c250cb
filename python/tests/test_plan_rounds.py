"""A bound search's rounds plan from the graph the passes before checkpoint left once
(joint.run_prepared): each round runs checkpoint alone, and its plan is the one the whole
pipeline makes."""

import graph_opt
from graph_opt.joint import _split_at_checkpoint, run_prepared

from inputs import zoo_archive

PRE = "repeat{cse,canonicalize,dce}"


def test_the_pipeline_splits_before_its_first_checkpoint_entry():
    ck = "checkpoint{activations=30%,cost=flops,measure=false}"
    assert _split_at_checkpoint(f"{PRE},{ck},dce") == (PRE, f"{ck},dce")
    assert _split_at_checkpoint(ck) == ("", ck)
    assert _split_at_checkpoint(PRE) == ("", PRE)  # no checkpoint: nothing to keep
    # nested: not split
    assert _split_at_checkpoint(f"cse,repeat{{{ck}}}") == ("", f"cse,repeat{{{ck}}}")


def test_rounds_from_the_prepared_graph_plan_as_the_whole_pipeline_does():
    graph = graph_opt.Graph.import_pt2(zoo_archive("gpt2-train.pt2"))
    prepared = {}
    for bound in ("10%", "50%", "1KiB"):
        ck = f"checkpoint{{activations={bound},cost=flops,measure=false,unmet=closest}}"
        whole = graph.clone()
        whole_result = graph_opt.run_pipeline(whole, f"{PRE},{ck}")
        round_, result = run_prepared(graph, f"{PRE},{ck}", prepared)
        assert round_.print() == whole.print(), bound
        assert result["reports"]["checkpoint"]["recomputations"] == \
            whole_result["reports"]["checkpoint"]["recomputations"]
        # what cse merged and canonicalize folded comes back as a value, the same whether
        # the passes before checkpoint ran in this round or once before it
        assert result["replaced"] == whole_result["replaced"], bound
    # the passes before checkpoint ran once, on a clone: the import is as it was
    assert list(prepared) == [PRE]
    assert graph.print() == graph_opt.Graph.import_pt2(zoo_archive("gpt2-train.pt2")).print()


def test_the_plan_comes_back_as_a_value_without_report_files():
    import json
    from graph_opt import _C
    graph = graph_opt.Graph.import_pt2(zoo_archive("gpt2-train.pt2"))
    ck = "checkpoint{activations=10%,cost=flops,measure=false}"
    result = _C.run_pipeline(graph, ck, report_dir="")  # no directory: no files written
    report = json.loads(result["report_values"]["checkpoint"])
    recomputations = report["recomputations"]
    assert recomputations and report["recomputed_nodes"]
    marked = [n for n in graph.nodes if n["attributes"].get(_C.RECOMPUTE_OF_ATTR) is not None]
    assert sorted(r["outputs"][0] for r in recomputations) == \
        sorted(n["outputs"][0] for n in marked)
    for r in recomputations:
        assert len(r["outputs"]) == len(r["of"])


def test_merged_and_folded_values_come_back_as_a_value():
    """run_pipeline's "replaced": each value cse merged or canonicalize folded, and the value
    of the graph as given that is read in its place (chains followed); the rewritten graph
    reads the replacement, never the value replaced."""
    given = graph_opt.Graph.import_pt2(zoo_archive("gpt2-train.pt2"))
    graph = given.clone()
    replaced = graph_opt.run_pipeline(graph, PRE)["replaced"]
    assert replaced, "cse and canonicalize replace values on GPT-2's training step"
    before = {v for n in given.nodes for v in n["outputs"]} | {i["name"] for i in given.inputs}
    after = {v for n in graph.nodes for v in n["outputs"]}
    read = {v for n in graph.nodes for v in n["operands"]} | {o["name"] for o in graph.outputs}
    for old, new in replaced.items():
        assert old in before and new in before, (old, new)
        assert old not in after and old not in read, old
        assert new not in replaced, (old, new)  # chains followed to their end
    # nothing to merge: nothing replaced
    assert graph_opt.run_pipeline(graph.clone(), "dce")["replaced"] == {}
