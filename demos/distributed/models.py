"""What the server and the ranks share without importing the ranks' machinery (DDP, FSDP, dynamo): the model
and the environment variables torchrun sets. The server imports this; only the ranks import `workers`."""

import torch
import torch.nn as nn

ENV_KEYS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


class Tower(nn.Module):
    """`layers` Linear(width, width) + tanh blocks, then a Linear(width, 1) head.

    head_first registers the head before the blocks, so registration order differs from the order of use.
    """

    def __init__(self, layers: int, width: int, head_first: bool = False):
        super().__init__()
        self.layers = layers
        if head_first:
            self.head = nn.Linear(width, 1)
        for i in range(layers):
            self.add_module(f"fc{i}", nn.Linear(width, width))
        if not head_first:
            self.head = nn.Linear(width, 1)

    def forward(self, x):
        for i in range(self.layers):
            x = torch.tanh(getattr(self, f"fc{i}")(x))
        return self.head(x)
