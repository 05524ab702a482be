"""ddptrain lint sample ddp016_a_dev_split_sampler: the fixed; `ddptrain lint` finds nothing here."""

import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

train_sampler = DistributedSampler(train_data)
device_sampler = DistributedSampler(device_logs)  # "dev" inside another word names no development split
loader = DataLoader(device_logs, sampler=device_sampler)
correct = evaluate(model, dev_loader)
dist.all_reduce(correct)
