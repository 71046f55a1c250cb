"""Driver of peer-baselines.test: harness.parse_peers and harness.peer_row on synthetic data."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                "benchmarks", "models"))
import harness  # noqa: E402

for text in ("compile-budget=0.3,checkpoint,compile-budget=0.1", "compile,eager", "checkpoint"):
    print(f"peers {text} -> {' '.join(harness.parse_peers(text))}")


def peer(seconds, peak, backward_start):
    return {"status": "ok", "verification": "passed", "step_seconds_median": seconds,
            "step_seconds_q1": seconds, "step_seconds_q3": seconds, "peak_bytes": peak,
            "backward_start_bytes": backward_start}


def show(config, data, baselines):
    row = harness.peer_row("m:tiny", config, data, baselines)
    if row["time_ratio"] is None:
        print(f"{config} vs {row['baseline']}: {row['note']}")
    else:
        print(f"{config} vs {row['baseline']}: time {row['time_ratio']:.3f} "
              f"peak {row['peak_ratio']:.3f} backward start {row['backward_start_ratio']:.3f}")


baselines = {"eager": peer(2.0, 1000, 500)}
show("checkpoint", peer(3.0, 250, 100), baselines)
baselines["compile"] = peer(1.6, 500, 200)
show("compile", baselines["compile"], baselines)
show("compile-budget=0.3", peer(2.0, 375, 100), baselines)
del baselines["compile"]
show("compile-budget=0.1", peer(2.0, 375, 100), baselines)
