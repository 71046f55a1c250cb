"""graph_opt.profiler: profiler sessions around a training loop (docs/Profiling.md)."""
import json
import os
import sys

import pytest
import torch

import graph_opt

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import zoo  # noqa: E402


def zoo_step(name):
    """The zoo's tiny NAME (tools/zoo) as the exporter builds it: its training-step module
    and inputs."""
    args = type("Args", (), {"tiny": True, "batch": None, "image_size": None, "seq_len": None})
    built = zoo.build_model(name, zoo.resolve_sizes(name, zoo.MODELS[name], args), 0,
                            dropout=True)
    step, _ = zoo.train_step_module(built)
    return step, built.train_args


def trace_steps(path):
    """The ProfilerStep#N numbers a Chrome trace holds."""
    events = json.load(open(path))["traceEvents"]
    return sorted({int(e["name"].split("#")[1]) for e in events
                   if e.get("name", "").startswith("ProfilerStep#")})


def test_schedule_records_exactly_the_active_steps_of_a_zoo_training_loop(tmp_path, capsys):
    step, args = zoo_step("gpt2")
    opt = torch.optim.SGD(step.parameters(), lr=1e-3)
    # skip 2, then twice: wait 1, warm up 1, record 2 -> steps 4, 5 and 8, 9 of 10
    with graph_opt.profiler(str(tmp_path), skip_first=2, wait=1, warmup=1, active=2, repeat=2,
                            model=step) as prof:
        for _ in range(10):
            opt.zero_grad()
            step(*args)[0].backward()
            opt.step()
            prof.step()
    assert prof.recorded_steps == [4, 5, 8, 9]
    assert [os.path.basename(t) for t in prof.traces] == [
        "trace_rank_0.1.pt.trace.json", "trace_rank_0.2.pt.trace.json"]
    assert [trace_steps(t) for t in prof.traces] == [[4, 5], [8, 9]]
    # TensorBoard's plugin layout: <dir>/<run>/<worker>.<span>.pt.trace.json
    assert all(os.path.dirname(t) == str(tmp_path / "graph_opt") for t in prof.traces)
    summary = json.load(open(tmp_path / "graph_opt" / "summary_rank_0.json"))
    assert summary["recorded_steps"] == [4, 5, 8, 9]
    # per-module attribution: forward ranges of the model's submodules, once per recorded step
    modules = {m["module"]: m for m in summary["modules"]}
    blocks = [m for m in modules if m.endswith(".attn")] or list(modules)
    assert blocks and all(modules[m]["calls"] == 4 for m in blocks)
    out = capsys.readouterr().out
    assert "graph_opt.profiler: recorded steps [4, 5, 8, 9]" in out
    assert "module (forward)" in out


class LinearConv(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.fc = torch.nn.Linear(32, 16)

    def forward(self, img, x):
        return self.conv(img).sum() + self.fc(x).sum()


def test_flops_of_mm_and_conv_are_the_analytic_count(tmp_path):
    torch.manual_seed(0)
    model = LinearConv()
    img, x = torch.randn(8, 3, 10, 10), torch.randn(8, 32)

    @graph_opt.profiler(str(tmp_path), warmup=1, active=2, model=model, print_summary=False)
    def train_step():
        model(img, x).backward()

    for _ in range(5):  # the session stops after its 3 steps; later calls run unprofiled
        train_step()
    prof = train_step.profiler
    assert prof.recorded_steps == [1, 2]
    addmm = 2 * 8 * 32 * 16                   # 2*M*K*N
    conv = 2 * 8 * 8 * 8 * 4 * 3 * 3 * 3      # 2 * batch * out_h * out_w * out_c * in_c * k * k
    assert prof.operators["aten::addmm"]["flops"] == 2 * addmm
    assert prof.operators["aten::conv2d"]["flops"] == 2 * conv
    assert prof.operators["aten::addmm"]["flops_per_s"] > 0
    assert prof.modules["fc"]["flops"] == 2 * addmm
    assert prof.modules["conv"]["flops"] == 2 * conv
    # the root adds the two sums: torch counts aten::add's one FLOP as well
    assert prof.modules["LinearConv"]["flops"] == 2 * (addmm + conv + 1)


def test_eager_compiled_step_joins_graph_opts_per_node_profile(tmp_path):
    """Compiled through graph_opt.backend(inner="eager"), the forward and backward halves
    run with one range per node; the session profiles each half with graph-opt and joins
    the two per-node tables by node name."""
    step, args = zoo_step("mlp")
    compiled = torch.compile(step, backend=graph_opt.backend("dce", inner="eager"))
    compiled(*args)[0].backward()  # compiled outside the session
    with graph_opt.profiler(str(tmp_path), warmup=1, active=2, print_summary=False) as prof:
        for _ in range(3):
            compiled(*args)[0].backward()
            prof.step()
    assert {j["graph"].rstrip("0123456789") for j in prof.joined} == {"forward", "backward"}
    for j in prof.joined:
        assert j["joined"] == j["nodes"] > 0, j
    rows = list(__import__("csv").DictReader(open(tmp_path / "graph_opt" / "graph_opt_nodes_rank_0.csv")))
    assert rows and all(float(r["graph_opt_median_us"]) >= 0 and int(r["trace_calls"]) == 2
                        for r in rows)
    # a tuple-returning operator is the graph-opt node named by its first getitem
    nll = [r for r in rows if r["op"].startswith("aten.nll_loss_forward")]
    assert nll and nll[0]["graph_opt_node"] != nll[0]["node"]
    assert any(r["op"].startswith("aten.mm") or r["op"].startswith("aten.addmm") for r in rows)


def test_nsight_on_the_cpu_says_there_are_no_ranges(tmp_path):
    with pytest.warns(UserWarning, match="NVTX ranges on CUDA only"):
        graph_opt.profiler(str(tmp_path), nsight=True)


@pytest.mark.parametrize("bad", [{"active": 0}, {"wait": -1}, {"repeat": 1.5}])
def test_a_bad_schedule_is_refused(bad, tmp_path):
    with pytest.raises(ValueError, match="graph_opt.profiler"):
        graph_opt.profiler(str(tmp_path), **bad)


def test_each_operator_is_timed_on_its_own_device():
    """An operator's time is its kernels' where it launched any (CUDA), else its CPU time:
    with a GPU present, a CPU operator (a host-side copy, an optimizer step on CPU tensors)
    read 0 when every row took the device's column. The events are stand-ins (no GPU here)."""
    from types import SimpleNamespace

    from graph_opt.session import own_device_time
    cpu_op = SimpleNamespace(self_cpu_time_total=7.0, cpu_time_total=9.0,
                             self_device_time_total=0.0, device_time_total=0.0)
    cuda_op = SimpleNamespace(self_cpu_time_total=2.0, cpu_time_total=3.0,
                              self_device_time_total=40.0, device_time_total=50.0)
    assert own_device_time(cpu_op) == (7.0, 9.0, "cpu")
    assert own_device_time(cuda_op) == (40.0, 50.0, "cuda")
