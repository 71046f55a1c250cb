"""Training a model of one's own under torch.compile with graph-opt's recomputation plan
(docs/TorchCompile.md):

    PYTHONPATH=build/python $(scripts/venv-dir.sh)/bin/python examples/compile_train.py

The model is examples/user_model.py's; the same loop runs under torch.compile's own partition
and under graph-opt's at memory_budget=0.3 (the bytes torch's activation_memory_budget=0.3
would allow), and prints both loss curves' ends, the activation bytes each keeps for backward
(measured with saved_tensors_hooks) and graph-opt's statistics.
"""
import copy
import os
import sys

import torch

import graph_opt
from graph_opt.testing import saved_activation_bytes

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from examples.user_model import training_step  # noqa: E402


def train(model, compiled, images, labels, steps=20):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    losses, saved = [], None
    for i in range(steps):
        opt.zero_grad(set_to_none=True)
        if i == 0:  # the activations the first forward keeps for backward
            state = list(model.parameters()) + list(model.buffers())
            saved, logits = saved_activation_bytes(compiled, (images,), exclude=state)
        else:
            logits = compiled(images)
        loss = torch.nn.functional.cross_entropy(logits, labels)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, saved


def main():
    model, _, (images, labels) = training_step()
    images = images.repeat(4, 1, 2, 2)  # 32 x 3 x 32 x 32: activations outweigh the weights
    labels = labels.repeat(4)
    theirs = copy.deepcopy(model)
    torch_losses, torch_saved = train(theirs, torch.compile(theirs), images, labels)
    torch._dynamo.reset()
    mine = torch.compile(model, backend=graph_opt.backend(memory_budget=0.3))
    losses, saved = train(model, mine, images, labels)
    print(f"torch.compile:            loss {torch_losses[0]:.4f} -> {torch_losses[-1]:.4f}, "
          f"saved for backward {torch_saved} bytes")
    print(f"graph-opt's partitioner:  loss {losses[0]:.4f} -> {losses[-1]:.4f}, "
          f"saved for backward {saved} bytes")
    stats = graph_opt.compile.stats()
    print(f"graph-opt partitioned {stats['graphs']} graph(s) in "
          f"{stats['planning_seconds']:.2f} s, {stats['fallbacks']} fallback(s)")
    for plan in stats["plans"]:
        print(f"  {plan['nodes']} nodes: keeps {plan['activation_bytes']} activation bytes "
              f"(bound {plan['activations_bound']}), recomputes {len(plan['recomputed'])} "
              "values")


if __name__ == "__main__":
    main()
