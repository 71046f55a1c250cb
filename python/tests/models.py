"""Small models the Python tests share."""
import torch


class ResidualMLP(torch.nn.Module):
    """`blocks` residual blocks x + down(activation(up(x))), 32 -> 256 -> 32, called from
    the model's own forward: on 256 rows the 256-wide activations (256 KiB each) dominate
    the step's peak, and they are the model's, not a submodule's."""

    def __init__(self, blocks, activation):
        super().__init__()
        self.up = torch.nn.ModuleList(torch.nn.Linear(32, 256) for _ in range(blocks))
        self.down = torch.nn.ModuleList(torch.nn.Linear(256, 32) for _ in range(blocks))
        self.activation = activation

    def forward(self, x):
        for u, d in zip(self.up, self.down):
            x = x + d(self.activation(u(x)))
        return x.square().mean()
