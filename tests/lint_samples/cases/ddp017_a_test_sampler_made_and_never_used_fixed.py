"""ddptrain lint sample ddp017_a_test_sampler_made_and_never_used: the fixed; `ddptrain lint` finds nothing here."""

import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


def evaluate(model, loader):
    model.eval()
    with torch.no_grad():
        losses = []
        for x, y in loader:
            losses.append(criterion(model(x), y).item())
    return sum(losses) / len(losses)


dist.init_process_group("gloo")
test_sampler = DistributedSampler(test_set, shuffle=False)
test_loader = DataLoader(test_set, shuffle=False)  # the sampler above is never used: every rank the whole set
for epoch in range(10):
    if dist.get_rank() == 0:
        val_loss = evaluate(model, test_loader)
        print(f"epoch {epoch} val loss {val_loss:.3f}")
