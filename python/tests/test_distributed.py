"""Collectives on two gloo ranks of this machine (docs/Distributed.md).

Each test starts its ranks in a session of their own and kills the whole session if the
test fails or runs out of time, so no rank outlives it. Timings are never asserted: the two
ranks share two cores with whatever else runs.
"""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap

import pytest
import torch.distributed as dist

from inputs import zoo_archive

# Python subprocesses: the fork server's client under ctest (conftest.py), else this interpreter.
PYTHON = os.environ.get("GRAPHOPT_TEST_PYTHON", sys.executable)

pytestmark = pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(),
                                reason="torch.distributed with gloo is not available")

# The longer checks (an export at two batch sizes, a 3 s collective timeout) run under
# `make test-distributed` (GRAPHOPT_DISTRIBUTED_ALL=1); make test keeps the others, to stay in
# its time on 2 cores.
slow = pytest.mark.skipif(not os.environ.get("GRAPHOPT_DISTRIBUTED_ALL"),
                          reason="make test-distributed runs it")

LAUNCH_TIMEOUT = 120  # seconds for a whole launch: ranks, rendezvous and the work
DIST_TIMEOUT = "60"   # graph-opt's --dist-timeout: no collective waits longer

# all_reduce twice (equal calls: no pass merges them), one unused (no pass removes it),
# an all_gather; each waited for before its result is read.
GRAPH = """graph @collectives {
  input %x : f32[4] user_input
forward:
  %a = _c10d_functional::all_reduce(%x, "sum", "0") : f32[4]
  %aw = _c10d_functional::wait_tensor(%a) : f32[4]
  %b = _c10d_functional::all_reduce(%x, "sum", "0") : f32[4]
  %bw = _c10d_functional::wait_tensor(%b) : f32[4]
  %unused = _c10d_functional::all_reduce(%x, "sum", "0") : f32[4]
  %unusedw = _c10d_functional::wait_tensor(%unused) : f32[4]
  %g = _c10d_functional::all_gather_into_tensor(%x, 2, "0") : f32[8]
  %gw = _c10d_functional::wait_tensor(%g) : f32[8]
  %s = aten::add.Tensor(%aw, %bw) : f32[4]
  output %s user_output
  output %gw user_output
}
"""


def run_session(cmd, cwd, env=None, timeout=LAUNCH_TIMEOUT):
    """Runs `cmd` in a new session; on a timeout kills every process of it. Returns
    (returncode, stdout + stderr)."""
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"{' '.join(cmd)} ran past {timeout} s:\n{out}")
    return proc.returncode, out


def torchrun(args, cwd):
    return run_session([PYTHON, "-m", "torch.distributed.run", "--standalone",
                        "--nproc-per-node", "2", *args], cwd)


EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples")


def test_driver_on_two_ranks(tmp_path):
    """torchrun -m graph_opt: data-parallel (the world size from the group) after the
    optimizer, the redundant-op passes (which leave collectives alone), a verified run (every
    rank gets the same inputs, so the averaged gradients are the local ones) and one output
    file per rank."""
    # "--": torchrun's own parser would take --run for its --run-path (docs/Distributed.md).
    rc, out = torchrun(["-m", "graph_opt", "--", os.path.join(EXAMPLES, "mlp_train_step.gir"),
                        "-passes=add-optimizer{kind=sgd},data-parallel{bucket=512},"
                        "repeat{cse,canonicalize,dce},profile{runs=2}", "--html=false",
                        "--run", "1", "--verify", "--dist-timeout", DIST_TIMEOUT,
                        "-o", "out.{rank}.gir", "--report-dir", "prof.{rank}"], tmp_path)
    assert rc == 0, out
    assert out.count("verification PASSED") == 2, out
    for rank in (0, 1):
        text = (tmp_path / f"out.{rank}.gir").read_text()
        assert text.count("_c10d_functional::all_reduce(") == 2, text
        # Each rank's profile: its communication, and a trace with a communication track.
        profile = json.loads((tmp_path / f"prof.{rank}" / "profile.json").read_text())
        comm = profile["communication"]
        assert (comm["rank"], comm["world_size"], comm["collectives"]) == (rank, 2, 2), comm
        trace = json.loads((tmp_path / f"prof.{rank}" / f"trace_rank_{rank}.json").read_text())
        track = [e for e in trace["traceEvents"] if e.get("tid") == 2 and e["ph"] == "X"]
        assert len(track) == 2 and all(e["cat"] == "communication" for e in track), track
    # Rank 0's one table for all ranks.
    assert "all 2 ranks (each rank's profile.json" in out, out


def test_driver_refuses_one_path_for_every_rank(tmp_path):
    """Checked before joining the group (so one process, as a rank of two, shows it)."""
    (tmp_path / "g.gir").write_text(GRAPH)
    rc, out = run_session([PYTHON, "-m", "graph_opt", "g.gir", "-o", "out.gir"],
                          tmp_path, env=dict(os.environ, WORLD_SIZE="2", RANK="0"))
    assert rc == 2, out
    assert "-o out.gir: with 2 ranks every rank would write it" in out, out
    assert not (tmp_path / "out.gir").exists()


# The other collectives, coalesced and list-valued ones among them.
OTHERS = """graph @others {
  input %x : f32[4] user_input
forward:
  %c0, %c1 = _c10d_functional::all_reduce_coalesced([%x, %x], "sum", "0") : f32[4], f32[4]
  %c0w = _c10d_functional::wait_tensor(%c0) : f32[4]
  %c1w = _c10d_functional::wait_tensor(%c1) : f32[4]
  %b = _c10d_functional::broadcast(%x, 0, "0") : f32[4]
  %bw = _c10d_functional::wait_tensor(%b) : f32[4]
  %x8 = aten::cat([%x, %x]) : f32[8]
  %rs = _c10d_functional::reduce_scatter_tensor(%x8, "sum", 2, "0") : f32[4]
  %rsw = _c10d_functional::wait_tensor(%rs) : f32[4]
  %a2a = _c10d_functional::all_to_all_single(%x, [2, 2], [2, 2], "0") : f32[4]
  %a2aw = _c10d_functional::wait_tensor(%a2a) : f32[4]
  output %c0w user_output
  output %c1w user_output
  output %bw user_output
  output %rsw user_output
  output %a2aw user_output
}
"""

VALUES = textwrap.dedent("""
    import datetime, sys
    import torch, torch.distributed as dist
    import graph_opt
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=%s))
    rank = dist.get_rank()
    graph = %r
    x = torch.full((4,), float(rank + 1))
    s, gathered = graph_opt.execute(graph_opt.Graph.parse(graph), inputs=[x])
    assert torch.equal(s, torch.full((4,), 6.0)), s  # (1 + 2) from each all_reduce
    assert torch.equal(gathered, torch.tensor([1.0] * 4 + [2.0] * 4)), gathered
    # The same graph made for four ranks: refused before anything runs.
    four = graph.replace('%%x, 2, "0"', '%%x, 4, "0"').replace("f32[8]", "f32[16]")
    try:
        graph_opt.execute(graph_opt.Graph.parse(four), inputs=[x])
        sys.exit("a graph for 4 ranks ran on 2")
    except graph_opt.Error as e:
        assert 'group_size=4 but process group "0" has 2 ranks' in str(e), e
    # A step rewritten by data-parallel{world=4} (its mean divides by 4) on 2 ranks: refused
    # before the first collective, naming the world it was made for.
    step = graph_opt.Graph.parse(%r)
    graph_opt.run_pipeline(step, "data-parallel{world=4}")
    try:
        graph_opt.execute(step)
        sys.exit("a step rewritten for 4 ranks ran on 2")
    except graph_opt.Error as e:
        assert "rewritten for 4 ranks (world_size = 4)" in str(e), e
    # Coalesced, broadcast, reduce-scatter, all-to-all (rank r holds r + 1 everywhere).
    c0, c1, b, rs, a2a = graph_opt.execute(graph_opt.Graph.parse(%r), inputs=[x])
    for name, got, want in (("all_reduce_coalesced", c0, [3.0] * 4), ("its second", c1, [3.0] * 4),
                            ("broadcast", b, [1.0] * 4), ("reduce_scatter", rs, [3.0] * 4),
                            ("all_to_all", a2a, [1.0, 1.0, 2.0, 2.0])):
        assert torch.equal(got, torch.tensor(want)), (name, got)
    dist.destroy_process_group()
    print(f"rank {rank}: ok")
""")


def test_collectives_compute_across_ranks(tmp_path):
    """graph_opt.execute in a user's own torchrun script: the values each rank gets."""
    step = open(os.path.join(EXAMPLES, "mlp_train_step.gir")).read()
    (tmp_path / "values.py").write_text(VALUES % (DIST_TIMEOUT, GRAPH, step, OTHERS))
    rc, out = torchrun(["values.py"], tmp_path)
    assert rc == 0, out
    assert "rank 0: ok" in out and "rank 1: ok" in out, out


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("peer", ["exits", pytest.param("hangs", marks=slow)])
def test_a_peer_that_fails_is_an_error_not_a_hang(tmp_path, peer):
    """Rank 1 joins the group, then exits or sleeps; rank 0's collective fails with the node
    named: gloo's "Connection closed by peer" at once, or its timeout after --dist-timeout."""
    (tmp_path / "g.gir").write_text(GRAPH)
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE="2")
    then = "" if peer == "exits" else "; import time; time.sleep(60)"
    other = subprocess.Popen(
        [PYTHON, "-c", "import datetime, torch.distributed as d; "
         "d.init_process_group('gloo', timeout=datetime.timedelta(seconds=60))" + then],
        env=dict(env, RANK="1"), cwd=tmp_path, start_new_session=True)
    try:
        rc, out = run_session([PYTHON, "-m", "graph_opt", "g.gir", "--run", "1",
                               "--dist-timeout", "3" if peer == "hangs" else DIST_TIMEOUT],
                              tmp_path, env=dict(env, RANK="0"))
    finally:
        os.killpg(other.pid, signal.SIGKILL)
        other.wait()
    assert rc == 2, out
    # The collective, or the wait for it, fails: which one depends on when gloo notices.
    assert re.search(r"node %\w+ = _c10d_functional::(all_reduce|wait_tensor)", out), out
    assert ("Connection closed by peer" if peer == "exits" else "Timed out") in out, out


DATA_PARALLEL = textwrap.dedent("""
    import datetime
    import torch, torch.distributed as dist
    import graph_opt
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=%s))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
    shard = slice(rank * 4, rank * 4 + 4)

    def gradients(graph, outputs):
        return {o["target"]: t for o, t in zip(graph.outputs, outputs) if o["role"] == "gradient"}

    half = graph_opt.Graph.load("half.pt2")  # the step at batch 4: one rank's shard
    graph_opt.run_pipeline(half, "data-parallel{bucket=1KiB}")  # world: the group's size
    averaged = gradients(half, graph_opt.execute(half, inputs=[x[shard], y[shard]]))
    full = graph_opt.Graph.load("full.pt2")  # the single-process step on the whole batch
    reference = gradients(full, graph_opt.execute(full, inputs=[x, y]))
    assert averaged.keys() == reference.keys() and len(reference) == 4, averaged.keys()
    for name, grad in reference.items():
        torch.testing.assert_close(averaged[name], grad, rtol=1e-5, atol=1e-6, msg=name)
    dist.destroy_process_group()
    print(f"rank {rank}: {len(reference)} gradients equal the full batch's")
""")


@slow
def test_data_parallel_equals_the_full_batch(tmp_path):
    """Two ranks, each on half a batch with data-parallel: the gradients are the
    single-process step's on the whole batch (the loss is a mean over the batch)."""
    import torch
    import graph_opt

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    loss = lambda m, x, y: torch.nn.functional.cross_entropy(m(x), y)  # noqa: E731
    for name, batch in (("half", 4), ("full", 8)):
        graph_opt.export_training_step(model, loss, (torch.randn(batch, 16),
                                                     torch.randint(0, 4, (batch,))),
                                       str(tmp_path / f"{name}.pt2"))
    (tmp_path / "dp.py").write_text(DATA_PARALLEL % DIST_TIMEOUT)
    rc, out = torchrun(["dp.py"], tmp_path)
    assert rc == 0, out
    for rank in (0, 1):
        assert f"rank {rank}: 4 gradients equal the full batch's" in out, out


ZOO_DATA_PARALLEL = textwrap.dedent("""
    import datetime
    import torch, torch.distributed as dist
    import graph_opt
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=%s))
    rank = dist.get_rank()
    path = %r

    def shard(inputs, r):  # rank r's tokens: the example's, rolled by r along the sequence
        return [t.roll(r, dims=-1) if t.dim() > 0 else t for t in inputs]

    def gradients(graph, outputs):
        return {o["target"]: t for o, t in zip(graph.outputs, outputs) if o["role"] == "gradient"}

    local = graph_opt.Graph.load(path)
    example = local.example_inputs
    assert example, "the zoo archive carries no example inputs"
    dp = local.clone()
    graph_opt.run_pipeline(dp, "add-optimizer{kind=sgd,lr=0.5},data-parallel{bucket=64KiB}")
    outputs, written = graph_opt.execute(dp, inputs=shard(example, rank), written=True)
    averaged = gradients(dp, outputs)
    # The reference, without collectives: each shard's step in this process, averaged.
    g0, g1 = (gradients(local, graph_opt.execute(local, inputs=shard(example, r))) for r in (0, 1))
    assert averaged.keys() == g0.keys() and len(g0) > 10, sorted(averaged)
    for name in g0:
        mean = (g0[name] + g1[name]) / 2
        torch.testing.assert_close(averaged[name], mean, rtol=1e-5, atol=1e-6, msg=name)
        # Every rank takes the same SGD step with the averaged gradient.
        torch.testing.assert_close(written[name], local.weights[name] - 0.5 * mean, rtol=1e-5,
                                   atol=1e-6, msg=name)
    buckets = sum(n["op"] == "_c10d_functional::all_reduce" for n in dp.nodes)
    dist.destroy_process_group()
    print(f"rank {rank}: {len(g0)} gradients averaged in {buckets} buckets")
""")


def test_data_parallel_on_the_zoo_gpt2(tmp_path):
    """The zoo's GPT-2 (tiny, no dropout) with SGD on two ranks, each on its own tokens: the
    gradients are the mean of the two single-process steps' (a real transformer's gradients,
    buckets closed by size and dtype), and every rank's updated weights the single step with
    that mean."""
    path = zoo_archive("gpt2-train-nodrop.pt2")
    (tmp_path / "dp.py").write_text(ZOO_DATA_PARALLEL % (DIST_TIMEOUT, path))
    rc, out = torchrun(["dp.py"], tmp_path)
    assert rc == 0, out
    found = re.findall(r"rank (\d): (\d+) gradients averaged in (\d+) buckets", out)
    assert sorted(r for r, _, _ in found) == ["0", "1"], out
    assert all(int(b) > 1 for _, _, b in found), out


ZOO_SHARDED = textwrap.dedent("""
    import datetime
    import torch, torch.distributed as dist
    import graph_opt
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=%s))
    rank, world = dist.get_rank(), dist.get_world_size()
    path = %r

    def tokens(inputs, r):  # rank r's tokens: the example's, rolled by r along the sequence
        return [t.roll(r, dims=-1) if t.dim() > 0 else t for t in inputs]

    def cut(whole):  # rank's shard: flattened, padded to world * chunk, its chunk
        chunk = -(-whole.numel() // world)
        flat = torch.nn.functional.pad(whole.reshape(-1), (0, chunk * world - whole.numel()))
        return flat[rank * chunk:(rank + 1) * chunk]

    def by_target(graph, values, role):
        return {o["target"].split("@shard:")[0]: t
                for o, t in zip(graph.outputs, values) if o["role"] == role}

    local = graph_opt.Graph.load(path)
    example = local.example_inputs
    g0, g1 = (by_target(local, graph_opt.execute(local, inputs=tokens(example, r)), "gradient")
              for r in (0, 1))
    lr = 0.5
    for pipeline in ("shard-parameters,add-optimizer{kind=sgd,lr=0.5}",
                     "shard-parameters{keep=100%%},add-optimizer{kind=sgd,lr=0.5}"):
        sharded = local.clone()
        graph_opt.run_pipeline(sharded, pipeline)
        outputs, written = graph_opt.execute(sharded, inputs=tokens(example, rank), written=True)
        grads = by_target(sharded, outputs, "gradient")
        assert grads.keys() == g0.keys() and len(g0) > 10, sorted(grads)
        for name in g0:
            mean = (g0[name] + g1[name]) / 2
            torch.testing.assert_close(grads[name], cut(mean), rtol=1e-5, atol=1e-6, msg=name)
            # The optimizer updated this rank's shard of the parameter (SGD: w - lr * g).
            whole = local.weights[name]
            torch.testing.assert_close(written[name + "@shard:0"], cut(whole - lr * mean),
                                       rtol=1e-5, atol=1e-6, msg=name)
        gathers = sum(n["op"] == "_c10d_functional::all_gather_into_tensor" for n in sharded.nodes)
        print(f"rank {rank}: {pipeline}: {len(g0)} gradient shards and updates, {gathers} gathers")
    dist.destroy_process_group()
""")


def test_shard_parameters_on_the_zoo_gpt2(tmp_path):
    """The zoo's GPT-2 with shard-parameters and SGD on two ranks, each on its own tokens:
    each rank's gradient shards are its cut of the mean of the two single-process steps'
    gradients, and its updated parameter shards the same cut of the updated parameters, with
    parameters gathered again for backward and with all kept."""
    path = zoo_archive("gpt2-train-nodrop.pt2")
    (tmp_path / "fsdp.py").write_text(ZOO_SHARDED % (DIST_TIMEOUT, path))
    rc, out = torchrun(["fsdp.py"], tmp_path)
    assert rc == 0, out
    found = re.findall(r"rank (\d): (\S+): (\d+) gradient shards and updates, (\d+) gathers", out)
    assert len(found) == 4, out
    gathers = {p: int(n) for _, p, _, n in found}
    # Gathered again for backward: more gathers than with every parameter kept.
    assert gathers["shard-parameters,add-optimizer{kind=sgd,lr=0.5}"] > \
        gathers["shard-parameters{keep=100%},add-optimizer{kind=sgd,lr=0.5}"], gathers


TIED_SHARDED = textwrap.dedent("""
    import datetime
    import torch, torch.distributed as dist
    import graph_opt
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=%s))
    rank, world = dist.get_rank(), dist.get_world_size()

    def cut(whole):
        chunk = -(-whole.numel() // world)
        flat = torch.nn.functional.pad(whole.reshape(-1), (0, chunk * world - whole.numel()))
        return flat[rank * chunk:(rank + 1) * chunk]

    local = graph_opt.Graph.load("tied.pt2")
    assert " tied " in str(local), "the export lost the tie"
    tokens = [t.roll(rank, dims=-1) for t in local.example_inputs]

    def grads(graph, outputs):
        return {o["target"].split("@shard:")[0]: t for o, t in zip(graph.outputs, outputs)
                if o["role"] == "gradient" and t is not None and t.numel()}

    g = [grads(local, graph_opt.execute(local, inputs=[t.roll(r, dims=-1)
                                                       for t in local.example_inputs]))
         for r in (0, 1)]
    sharded = local.clone()
    graph_opt.run_pipeline(sharded, "shard-parameters,add-optimizer{kind=sgd,lr=0.5}")
    text = str(sharded)
    # Three storages (the tied embedding and head, mix's weight and bias): three gathers in forward.
    gathers = [line for line in text.splitlines()
               if "all_gather_into_tensor(" in line and '"gather again' not in line]
    assert len(gathers) == 3, text
    outputs, written = graph_opt.execute(sharded, inputs=tokens, written=True)
    mine = grads(sharded, outputs)
    assert mine.keys() == g[0].keys() and mine, (sorted(mine), sorted(g[0]))
    for name in mine:
        torch.testing.assert_close(mine[name], cut((g[0][name] + g[1][name]) / 2), msg=name)
    # One update of the shared storage with every gradient that reaches it.
    tied = [i["target"] for i in local.inputs
            if i["role"] == "parameter" and i["type"].startswith("f32[11, 6]")]
    assert len(tied) == 2, local.inputs
    total = sum((g[0][n] + g[1][n]) / 2 for n in tied if n in g[0])
    whole = local.weights[tied[0]]
    # The owner's shard (the earlier input) is written, once; the tied shard is its storage.
    assert tied[1] + "@shard:0" not in written, sorted(written)
    torch.testing.assert_close(written[tied[0] + "@shard:0"], cut(whole - 0.5 * total))
    dist.destroy_process_group()
    print(f"rank {rank}: tied shards agree ({len(mine)} gradients)")
""")


@slow
def test_shard_parameters_with_tied_weights(tmp_path):
    """An embedding tied to the output head (one storage, two inputs): gathered once, each
    rank's gradient shards and its shard of the one SGD update equal the same cut of the two
    single-process steps'."""
    import torch
    import graph_opt

    class Tied(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(11, 6)
            self.mix = torch.nn.Linear(6, 6)
            self.head = torch.nn.Linear(6, 11, bias=False)
            self.head.weight = self.embed.weight

        def forward(self, tokens):
            return self.head(torch.tanh(self.mix(self.embed(tokens))))

    torch.manual_seed(0)
    tokens = torch.randint(0, 11, (3, 5))
    graph_opt.export_training_step(
        Tied(), lambda m, t: torch.nn.functional.cross_entropy(m(t).flatten(0, 1), t.flatten()),
        (tokens,), str(tmp_path / "tied.pt2"))
    (tmp_path / "tied.py").write_text(TIED_SHARDED % DIST_TIMEOUT)
    rc, out = torchrun(["tied.py"], tmp_path)
    assert rc == 0, out
    assert len(re.findall(r"rank \d: tied shards agree", out)) == 2, out


PROFILED = textwrap.dedent("""
    import datetime, json, os, sys
    import torch, torch.distributed as dist
    import graph_opt
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=%s))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    x = torch.randn(8, 16) + rank
    with graph_opt.profiler("prof", warmup=1, active=2, model=model) as prof:
        for _ in range(3):
            model(x).square().sum().backward()
            for p in model.parameters():
                dist.all_reduce(p.grad)
            prof.step()
    assert prof.rank == rank and prof.recorded_steps == [1, 2], (prof.rank, prof.recorded_steps)
    trace = json.load(open(f"prof/graph_opt/trace_rank_{rank}.1.pt.trace.json"))
    steps = {e["name"] for e in trace["traceEvents"] if e.get("name", "").startswith("ProfilerStep#")}
    assert steps == {"ProfilerStep#1", "ProfilerStep#2"}, steps
    summary = json.load(open(f"prof/graph_opt/summary_rank_{rank}.json"))
    assert summary["rank"] == rank and summary["modules"], summary
    assert any(op["name"].startswith("c10d::allreduce") or "all_reduce" in op["name"]
               for op in summary["operators"]), [op["name"] for op in summary["operators"]]
    dist.destroy_process_group()
    print(f"rank {rank}: profiled")
""")


def test_profiler_session_on_two_ranks(tmp_path):
    """graph_opt.profiler in a user's torchrun script: a trace and a summary file per rank,
    the console summary from rank 0 only."""
    (tmp_path / "profiled.py").write_text(PROFILED % DIST_TIMEOUT)
    rc, out = torchrun(["profiled.py"], tmp_path)
    assert rc == 0, out
    assert "rank 0: profiled" in out and "rank 1: profiled" in out, out
    assert out.count("graph_opt.profiler: recorded steps [1, 2]") == 1, out
    for rank in (0, 1):
        assert (tmp_path / "prof" / "graph_opt" / f"trace_rank_{rank}.1.pt.trace.json").is_file()
