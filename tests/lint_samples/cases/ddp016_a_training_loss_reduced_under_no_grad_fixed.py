"""ddptrain lint sample ddp016_a_training_loss_reduced_under_no_grad: the fixed; `ddptrain lint` finds nothing here."""

import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


def reduce_loss(loss):
    with torch.no_grad():
        dist.reduce(loss, dst=0)  # the training loss: no evaluation is combined


def evaluate(loader):
    net.eval()
    predictions = []
    with torch.no_grad():
        for x, y in loader:
            predictions.append(net(x).argmax(1))
    return torch.cat(predictions)


val_sampler = DistributedSampler(val_set)
val_loader = DataLoader(val_set, sampler=val_sampler)
for x, y in train_loader:
    loss = criterion(net(x), y)
    loss.backward()
    reduce_loss(loss)
torch.save(evaluate(val_loader), f"predictions.rank{dist.get_rank()}.pt")  # each rank's own, kept apart
