"""A model of one's own, for `python -m graph_opt export examples.user_model:training_step`,
or profiled in three lines by running this file (graph_opt.profile).

docs/Importing.md starts from it: export the training step, then profile it with graph-opt.
"""
import torch
import torch.nn.functional as F


class SmallConvNet(torch.nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
            torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU())
        self.head = torch.nn.Linear(32, classes)

    def forward(self, x):
        return self.head(self.features(x).mean(dim=(2, 3)))


def loss_fn(model, images, labels):
    return F.cross_entropy(model(images), labels)


def training_step():
    """(model, loss_fn, example_inputs): what graph_opt.export_training_step takes."""
    torch.manual_seed(0)
    return SmallConvNet(), loss_fn, (torch.randn(8, 3, 16, 16), torch.randint(0, 10, (8,)))


if __name__ == "__main__":
    # The three-line profile (docs/Python.md): python examples/user_model.py [report.html]
    import sys

    import graph_opt
    model, _, (images, labels) = training_step()
    report = graph_opt.profile(model, (images, labels),
                               loss_fn=lambda m, x, y: F.cross_entropy(m(x), y),
                               html=sys.argv[1] if len(sys.argv) > 1 else None)
    print(report)
