"""Two real models for gradcli's PyTorch road: a 2-layer nn.TransformerEncoder (d_model 64, 4 heads) on
8 tokens, and a small CNN (conv, batch norm, ReLU, pooling, linear); and a 10^4-deep sin loop.

    gradcli graph examples/torch/models.py:transformer_at --at s=0.1 -o transformer.html
    gradcli check examples/torch/models.py:transformer_at --at s=0.1

benchmarks/framework_pictures.py draws them (and torchviz's make_dot of the transformer beside them).
"""

import torch
from torch import nn

torch.manual_seed(0)
encoder = nn.TransformerEncoder(
    nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, dropout=0.0, batch_first=True),
    num_layers=2,
    enable_nested_tensor=False,
).double()


def tokens_at(s):
    """8 tokens of 64 features from one number, so a command line can give them: sin(s + k / 10), k = 0..511."""
    return torch.sin(s + torch.arange(512, dtype=torch.float64) / 10).reshape(1, 8, 64)


def transformer_at(s):
    """The transformer on ``tokens_at(s)``: ``gradcli graph examples/torch/models.py:transformer_at --at s=0.1``."""
    return transformer(tokens_at(s))


def transformer(tokens):
    """A 2-layer encoder (d_model 64, 4 heads) on 8 tokens: tokens has shape (1, 8, 64)."""
    return encoder(tokens).pow(2).mean()


cnn = nn.Sequential(
    nn.Conv2d(1, 4, 3, padding=1),
    nn.BatchNorm2d(4),
    nn.ReLU(),
    nn.MaxPool2d(2),
    nn.Conv2d(4, 8, 3, padding=1),
    nn.BatchNorm2d(8),
    nn.ReLU(),
    nn.AdaptiveAvgPool2d(1),
    nn.Flatten(),
    nn.Linear(8, 10),
).double()


def convnet(image):
    """A small CNN on one 1x8x8 image: conv, batch norm, ReLU, pooling, linear."""
    return torch.log_softmax(cnn(image), dim=-1)[0, 3]


def deep(x):
    for _ in range(10_000):
        x = torch.sin(x)
    return x
