"""ddptrain lint sample ddp016_a_training_loss_reduced_under_no_grad: the mistake (lines marked `# expect:` get exactly those findings)."""

import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


def reduce_loss(loss):
    with torch.no_grad():
        dist.reduce(loss, dst=0)


def evaluate(loader):
    net.eval()
    correct = torch.zeros(1)
    with torch.no_grad():
        for x, y in loader:
            correct += (net(x).argmax(1) == y).sum()
    dist.all_reduce(correct)  # sums over a padded sampler: repeated images counted twice
    return correct


val_sampler = DistributedSampler(val_set)  # expect: DDP016
val_loader = DataLoader(val_set, sampler=val_sampler)
for x, y in train_loader:
    loss = criterion(net(x), y)
    loss.backward()
    reduce_loss(loss)
correct = evaluate(val_loader)
