"""ddptrain lint sample ddp017_counts_returned_and_printed_as_an_accuracy: the fixed; `ddptrain lint` finds nothing here."""

import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


def evaluate(model, loader):
    model.eval()
    cnt = total = 0
    with torch.no_grad():
        for x, y in loader:
            cnt += (model(x).argmax(1) == y).sum().item()
            total += len(y)
    return cnt, total


dist.init_process_group("gloo")
val_loader = DataLoader(val_set, batch_size=64, sampler=DistributedSampler(val_set, drop_last=True))
for epoch in range(10):
    train_one_epoch(model, train_loader)
    cnt, total = evaluate(model, val_loader)
    counts = torch.tensor([cnt, total])
    dist.all_reduce(counts)  # every rank's counts summed before the figure is made
    if dist.get_rank() == 0:
        print(f"epoch {epoch} eval accuracy: {counts[0] / counts[1]}")
    images = evaluate(model, val_loader)[1]
    print(f"rank {dist.get_rank()} evaluated {images} images")  # a count, said to be this rank's: no metric
