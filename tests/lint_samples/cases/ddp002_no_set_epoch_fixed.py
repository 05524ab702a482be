"""ddptrain lint sample ddp002_no_set_epoch: the fixed; `ddptrain lint` finds nothing here."""
import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
sampler = DistributedSampler(ds)
loader = DataLoader(ds, sampler=sampler, drop_last=True)
for epoch in range(10):
    sampler.set_epoch(epoch)
    for batch in loader:
        step(batch)
