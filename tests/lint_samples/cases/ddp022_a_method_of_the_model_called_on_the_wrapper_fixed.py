"""ddptrain lint sample ddp022_a_method_of_the_model_called_on_the_wrapper: the fixed; `ddptrain lint` finds nothing here."""
import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


class Recommender(nn.Module):
    def __init__(self):
        super().__init__()
        self.scores = nn.Linear(4, 10)

    def forward(self, users):
        return self.scores(users)

    def predict(self, users, items):
        return self.scores(users)[:, items]


def evaluate(model, users, items):
    model.eval()
    with torch.no_grad():
        return model.predict(users, items).argmax(1)


dist.init_process_group("gloo")
model = DDP(Recommender())
for step in range(10):
    model(torch.randn(8, 4)).sum().backward()
print(evaluate(model.module, torch.randn(8, 4), [1, 2, 3]))  # the inner model has predict()
