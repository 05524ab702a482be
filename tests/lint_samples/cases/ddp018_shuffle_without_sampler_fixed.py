"""ddptrain lint sample ddp018_shuffle_without_sampler: the fixed; `ddptrain lint` finds nothing here."""

import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

dist.init_process_group("gloo")
model = DDP(net)
sampler = DistributedSampler(train_set, shuffle=True)
loader = DataLoader(train_set, batch_size=32, sampler=sampler)
for epoch in range(10):
    sampler.set_epoch(epoch)
    for batch in loader:
        step(model, batch)
