"""ddptrain lint sample ddp023_a_split_drawn_by_each_rank: the fixed; `ddptrain lint` finds nothing here."""
import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, random_split


dist.init_process_group("gloo")
torch.manual_seed(1234 + dist.get_rank())  # a different augmentation stream per rank...
model = DDP(nn.Linear(2, 2))
# ...but one split for all: its own generator, seeded alike on every rank
train_set, val_set = random_split(dataset, [900, 100], generator=torch.Generator().manual_seed(1234))
sampler = DistributedSampler(train_set)
for epoch in range(3):
    sampler.set_epoch(epoch)
    for x, y in DataLoader(train_set, sampler=sampler, batch_size=8):
        nn.functional.cross_entropy(model(x), y).backward()
