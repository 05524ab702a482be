"""ddptrain lint sample ddp016_a_dev_split_sampler: the mistake (lines marked `# expect:` get exactly those findings)."""

import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

train_sampler = DistributedSampler(train_data)
dev_sampler = DistributedSampler(dev_data)  # expect: DDP016
dev_loader = DataLoader(dev_data, sampler=dev_sampler)  # a development split, padded like any other
correct = evaluate(model, dev_loader)
dist.all_reduce(correct)
