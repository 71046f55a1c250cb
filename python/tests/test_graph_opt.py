"""graph_opt from Python: graphs, pipelines, execution and errors (docs/Python.md).

Run by ctest (PythonTests) with the build's package directory on PYTHONPATH."""
import os

import pytest
import torch

import graph_opt
from inputs import bad_inputs_dir, zoo_archive


SCALE = """graph @scale {
  input %x : f32[4] user_input
forward:
  %a = aten::mul.Tensor(%x, 2) : f32[4]
  %b = aten::mul.Tensor(%x, 2) : f32[4]
  %c = aten::add.Tensor(%a, %b) : f32[4]
  output %c user_output
}
"""


def zoo(name):
    return zoo_archive(name)


def test_parse_print_and_read_only_views():
    g = graph_opt.Graph.parse(SCALE)
    assert g.name == "scale"
    assert graph_opt.Graph.parse(g.print()).print() == g.print()
    assert [n["op"] for n in g.nodes] == ["aten::mul.Tensor", "aten::mul.Tensor", "aten::add.Tensor"]
    assert g.nodes[2]["operands"] == ["a", "b"]
    assert g.inputs[0] == {"name": "x", "type": "f32[4]", "role": "user_input", "target": ""}
    assert g.outputs[0]["role"] == "user_output"
    assert g.summary().startswith("graph @scale: 3 nodes, 4 values\n")
    g.verify()


def test_pipeline_changes_the_graph_and_reports_statistics():
    g = graph_opt.Graph.parse(SCALE)
    x = torch.arange(4, dtype=torch.float32)
    before = graph_opt.execute(g, [x])
    result = graph_opt.run_pipeline(g, "repeat{cse,canonicalize,dce}")
    assert result["changed"]
    assert result["pipeline"] == "repeat{cse,canonicalize,dce}"
    repeat = result["statistics"][0]
    assert repeat["pass"] == "repeat" and repeat["statistics"]["rounds"] >= 1
    assert [n["pass"] for n in repeat["nested"]] == ["cse", "canonicalize", "dce"]
    assert sum(repeat["nested"][0]["statistics"].values()) >= 1  # cse merged something
    assert len(g.nodes) == 2  # the second mul merged into the first
    after = graph_opt.execute(g, [x])
    assert torch.equal(before[0], after[0])
    assert torch.equal(after[0], x * 2 + x * 2)


def test_zoo_training_graph_runs_and_optimizes_bitwise():
    g = graph_opt.Graph.load(zoo("mlp-train.pt2"))
    text = g.print()
    first = graph_opt.execute(g)
    again = graph_opt.execute(g)
    assert [o.shape for o in first] == [o.shape for o in again]
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    optimized = g.clone()
    graph_opt.run_pipeline(optimized, "repeat{cse,canonicalize,dce}")
    assert all(torch.equal(a, b) for a, b in zip(first, graph_opt.execute(optimized)))
    report = graph_opt.verify_rewrite(g, optimized, bitwise=True, check=True)
    assert report["passed"] and report["outputs"]
    assert all(o["passed"] and o["bitwise"] for o in report["outputs"])
    # The original is untouched by the clone's pipeline.
    assert g.print() == text


def test_pipeline_reports_come_back_as_python_objects(tmp_path):
    g = graph_opt.Graph.load(zoo("mlp-train.pt2"))
    result = graph_opt.run_pipeline(g, "liveness,checkpoint{activations=50%},liveness")
    liveness, plan = result["reports"]["liveness"], result["reports"]["checkpoint"]
    # Both liveness runs and the checkpoint run are there, in pipeline order.
    assert [s["pass"] for s in result["statistics"]] == ["liveness", "checkpoint", "liveness"]
    assert liveness["graph"] == g.name and liveness["peak_bytes"] > 0
    assert plan["planner"] == "greedy"
    assert plan["predicted_saved_activation_bytes"] <= plan["unoptimised_saved_activation_bytes"]
    # With a report directory the files stay there, CSVs included.
    kept = graph_opt.run_pipeline(g.clone(), "liveness", report_dir=tmp_path)
    assert kept["reports"]["liveness"]["peak_bytes"] > 0
    assert (tmp_path / "liveness.json").is_file() and (tmp_path / "liveness_values.csv").is_file()


def test_errors_are_graph_opt_errors_with_the_drivers_exit_code():
    with pytest.raises(graph_opt.Error) as e:
        graph_opt.Graph.parse("graph @g {\n  %y = aten::relu(%nope) : f32[2]\n}\n", "bad.gir")
    assert "bad.gir:2:" in str(e.value) and e.value.exit_code == 2
    with pytest.raises(graph_opt.Error) as e:
        graph_opt.Graph.load("/nonexistent/model.pt2")
    assert "/nonexistent/model.pt2" in str(e.value)
    g = graph_opt.Graph.parse(SCALE)
    with pytest.raises(graph_opt.Error) as e:
        graph_opt.run_pipeline(g, "cse,no-such-pass")
    assert "no-such-pass" in str(e.value)
    with pytest.raises(graph_opt.Error) as e:
        graph_opt.execute(g, [torch.zeros(3)])
    assert e.value.exit_code == 2


def test_a_wrong_rewrite_fails_verification_with_exit_code_1():
    g = graph_opt.Graph.parse(SCALE)
    wrong = graph_opt.Graph.parse(SCALE.replace("%b = aten::mul.Tensor(%x, 2)", "%b = aten::mul.Tensor(%x, 3)"))
    report = graph_opt.verify_rewrite(g, wrong)
    assert not report["passed"] and "FAILED" in report["text"]
    with pytest.raises(graph_opt.Error) as e:
        graph_opt.verify_rewrite(g, wrong, check=True)
    assert e.value.exit_code == 1


def test_mangled_text_raises_or_parses_and_never_aborts():
    # A seeded property test: deleted, repeated and replaced characters of a
    # good graph either parse (and then print and run or raise) or raise
    # graph_opt.Error; nothing escapes as another exception or aborts.
    import random
    rng = random.Random(27)
    alphabet = "%@:[](){},=.0123456789-afgiux \n"
    for _ in range(300):
        chars = list(SCALE)
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(chars))
            kind = rng.randrange(3)
            if kind == 0:
                del chars[i]
            elif kind == 1:
                chars.insert(i, chars[i])
            else:
                chars[i] = rng.choice(alphabet)
        try:
            g = graph_opt.Graph.parse("".join(chars))
            g.print()
            graph_opt.execute(g)
        except graph_opt.Error as e:
            assert e.exit_code == 2 and str(e)


def test_runs_are_held_to_max_memory():
    huge = graph_opt.Graph.parse("""graph @huge {
  input %x : f32[100000, 1000000] user_input
forward:
  %y = aten::relu(%x) : f32[100000, 1000000]
  output %y user_output
}
""")
    # The default is half of physical memory: 745 GiB is refused before anything is made.
    with pytest.raises(graph_opt.Error, match="at its simulated peak"):
        graph_opt.execute(huge)
    g = graph_opt.Graph.parse(SCALE)
    with pytest.raises(graph_opt.Error, match="more than --max-memory=8 B"):
        graph_opt.execute(g, max_memory=8)
    with pytest.raises(graph_opt.Error, match="max_memory=lots"):
        graph_opt.execute(g, max_memory="lots")
    assert graph_opt.execute(g, max_memory="1MiB")[0].shape == (4,)


def test_broken_archives_raise_and_never_abort():
    bad = bad_inputs_dir()
    names = sorted(os.listdir(bad))
    assert names
    refused = 0
    for name in names:
        try:
            g = graph_opt.Graph.load(os.path.join(bad, name))
        except graph_opt.Error as e:
            assert e.exit_code == 2 and str(e)
            refused += 1
            continue
        if name == "wrong-declared-strides.pt2":
            # Only a layout the kernel contradicts: corrected at import, passes run.
            assert not g.type_conflicts, g.type_conflicts
            graph_opt.run_pipeline(g, "dce")
            continue
        # What imports with a declared-type conflict refuses every pass instead.
        assert g.type_conflicts, name
        with pytest.raises(graph_opt.Error, match="would rely on a declared type"):
            graph_opt.run_pipeline(g, "dce")
    assert refused >= len(names) - 2


def test_the_users_own_training_is_unchanged_around_a_graph_opt_call():
    def train():
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        x = torch.randn(256, 64)
        losses = []
        for _ in range(3):
            opt.zero_grad()
            loss = model(x).pow(2).mean()
            loss.backward()
            opt.step()
            losses.append(loss.detach())
        return torch.stack(losses)

    assert not graph_opt._C._cpu_allocator_hooks_active()
    before = train()
    g = graph_opt.Graph.load(zoo("mlp-train.pt2"))
    graph_opt.run_pipeline(g, "profile{runs=2}")  # measures through graph-opt's allocators
    graph_opt.execute(g)
    assert not graph_opt._C._cpu_allocator_hooks_active()
    after = train()
    assert torch.equal(before, after)


def test_torch_errors_stay_torchs():
    # graph_opt's exception translator is local to its module: pybind11 shares
    # translators across modules, and a global one would turn torch's errors into ours.
    with pytest.raises(RuntimeError) as e:
        torch.randn(2).item()
    assert not isinstance(e.value, graph_opt.Error)


LARGE = SCALE.replace("@scale", "@large").replace("f32[4]", "f32[65536]")


def test_execute_keeps_its_executor_so_the_memory_plan_replays():
    # execute() keeps one executor per graph: from the second call on, the
    # step's temporaries (a and b: 256 KiB each) come from the plan's arena
    # instead of fresh pages. An edit, another seed or written=True makes a new
    # executor, which records again.
    g = graph_opt.Graph.parse(LARGE)
    x = torch.arange(65536, dtype=torch.float32)
    assert graph_opt._C._memory_plan_stats(g) is None
    want = x * 4
    for _ in range(3):
        assert torch.equal(graph_opt.execute(g, [x])[0], want)
    stats = graph_opt._C._memory_plan_stats(g)
    assert stats["records"] == 1 and stats["served"] >= 4 and stats["arena_bytes"] > 0
    assert graph_opt.run_pipeline(g, "cse")["changed"]  # an edit: b merges into a
    assert torch.equal(graph_opt.execute(g, [x])[0], want)
    assert graph_opt._C._memory_plan_stats(g)["served"] == 0
    graph_opt.execute(g, [x], seed=1)
    assert graph_opt._C._memory_plan_stats(g)["served"] == 0
    graph_opt.execute(g, [x], seed=1, written=True)  # reusing seed=1's would replay
    assert graph_opt._C._memory_plan_stats(g)["served"] == 0
