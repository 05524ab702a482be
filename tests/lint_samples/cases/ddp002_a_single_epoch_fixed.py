"""ddptrain lint sample ddp002_a_single_epoch: the fixed; `ddptrain lint` finds nothing here."""

import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

sampler = DistributedSampler(ds)
loader = DataLoader(ds, sampler=sampler)
for epoch in range(1):  # one epoch: its order is never repeated
    for batch in loader:
        step(batch)
