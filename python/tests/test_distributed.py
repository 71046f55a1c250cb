"""Collectives on two gloo ranks of this machine (docs/Distributed.md).

Each test starts its ranks in a session of their own and kills the whole session if the
test fails or runs out of time, so no rank outlives it. Timings are never asserted: the two
ranks share two cores with whatever else runs.
"""
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap

import pytest
import torch.distributed as dist

pytestmark = pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(),
                                reason="torch.distributed with gloo is not available")

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
    return run_session([sys.executable, "-m", "torch.distributed.run", "--standalone",
                        "--nproc-per-node", "2", *args], cwd)


def test_driver_on_two_ranks(tmp_path):
    """torchrun -m graph_opt: passes, a verified run and one output file per rank."""
    (tmp_path / "g.gir").write_text(GRAPH)
    # "--": torchrun's own parser would take --run for its --run-path (docs/Distributed.md).
    rc, out = torchrun(["-m", "graph_opt", "--", "g.gir", "-passes=repeat{cse,canonicalize,dce}",
                        "--run", "1", "--verify", "--dist-timeout", DIST_TIMEOUT,
                        "-o", "out.{rank}.gir"], tmp_path)
    assert rc == 0, out
    assert out.count("verification PASSED") == 2, out
    for rank in (0, 1):
        text = (tmp_path / f"out.{rank}.gir").read_text()
        assert text.count("_c10d_functional::all_reduce(") == 3, text


def test_driver_refuses_one_path_for_every_rank(tmp_path):
    (tmp_path / "g.gir").write_text(GRAPH)
    rc, out = torchrun(["-m", "graph_opt", "g.gir", "-o", "out.gir"], tmp_path)
    assert rc != 0
    assert "-o out.gir: with 2 ranks every rank would write it" in out, out
    assert not (tmp_path / "out.gir").exists()


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
    dist.destroy_process_group()
    print(f"rank {rank}: ok")
""")


def test_collectives_compute_across_ranks(tmp_path):
    """graph_opt.execute in a user's own torchrun script: the values each rank gets."""
    (tmp_path / "values.py").write_text(VALUES % (DIST_TIMEOUT, GRAPH))
    rc, out = torchrun(["values.py"], tmp_path)
    assert rc == 0, out
    assert "rank 0: ok" in out and "rank 1: ok" in out, out


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("peer", ["exits", "hangs"])
def test_a_peer_that_fails_is_an_error_not_a_hang(tmp_path, peer):
    """Rank 1 joins the group, then exits or sleeps; rank 0's collective fails with the node
    named: gloo's "Connection closed by peer" at once, or its timeout after --dist-timeout."""
    (tmp_path / "g.gir").write_text(GRAPH)
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE="2")
    then = "" if peer == "exits" else "; import time; time.sleep(60)"
    other = subprocess.Popen(
        [sys.executable, "-c", "import datetime, torch.distributed as d; "
         "d.init_process_group('gloo', timeout=datetime.timedelta(seconds=60))" + then],
        env=dict(env, RANK="1"), cwd=tmp_path, start_new_session=True)
    try:
        rc, out = run_session([sys.executable, "-m", "graph_opt", "g.gir", "--run", "1",
                               "--dist-timeout", "5" if peer == "hangs" else DIST_TIMEOUT],
                              tmp_path, env=dict(env, RANK="0"))
    finally:
        os.killpg(other.pid, signal.SIGKILL)
        other.wait()
    assert rc == 2, out
    # The collective, or the wait for it, fails: which one depends on when gloo notices.
    assert re.search(r"node %\w+ = _c10d_functional::(all_reduce|wait_tensor)", out), out
    assert ("Connection closed by peer" if peer == "exits" else "Timed out") in out, out
