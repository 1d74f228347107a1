"""Two small models for the CPU-only rehearsal of docs/calibrate.md's walkthrough: factories for
`python3 -m paritycheck.dump --model standin_models:NAME` (model, inputs), built after the
dumper's torch.manual_seed(--seed), so each seed is another honest run."""
import torch
from torch import nn


def cnn():
    """Conv, BatchNorm (train mode), ReLU, pooling and a linear head on 8 images of 3x16x16."""
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                          nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))
    return model, torch.randn(8, 3, 16, 16)


def mlp():
    """A three-layer MLP with GELU and LayerNorm on a batch of 32 rows of 64 features."""
    model = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.LayerNorm(256), nn.Linear(256, 256),
                          nn.Tanh(), nn.Linear(256, 16), nn.Softmax(dim=-1))
    return model, torch.randn(32, 64)
