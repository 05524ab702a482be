"""ddptrain lint sample ddp002_a_single_epoch: the mistake (lines marked `# expect:` get exactly those findings)."""

import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

sampler = DistributedSampler(ds)  # expect: DDP002
loader = DataLoader(ds, sampler=sampler)
for epoch in range(3):
    for batch in loader:
        step(batch)
