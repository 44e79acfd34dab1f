"""Two gradients that go wrong, for ``gradcli why``: the first layer's bias pushed every ReLU off
(x's gradient is zero), and a scale taken through ``.detach()`` (w's gradient is None).

    gradcli why examples/torch/why.py:loss --at x=[1,-2],w=[0.5,1.5]
"""

import torch
from torch import nn

torch.manual_seed(0)


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.hidden = nn.Linear(2, 4)
        self.act = nn.ReLU()
        self.out = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.act(self.hidden(x)))


model = MLP().double()
with torch.no_grad():
    model.hidden.bias.fill_(-10.0)  # every unit off for inputs of this size


def loss(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    scale = w.detach() ** 2  # meant: w ** 2
    return (model(x) * scale).sum()
