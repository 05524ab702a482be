"""ddptrain lint sample ddp010_the_same_function_in_both_arms: the fixed; `ddptrain lint` finds nothing here."""

import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


def train_and_evaluate(rank, epoch, net_g, loader, writer):
    for batch in loader:
        net_g(batch).mean().backward()
    if rank == 0:
        with torch.no_grad():
            sample = net_g.module.infer(batch)  # the plain model: no collective on rank 0 alone


dist.init_process_group("gloo")
rank = dist.get_rank()
net_g = DDP(Generator())
for epoch in range(epochs):
    if rank == 0:
        train_and_evaluate(rank, epoch, net_g, loader, writer)
    else:
        train_and_evaluate(rank, epoch, net_g, loader, None)  # every rank trains; only rank 0 writes
