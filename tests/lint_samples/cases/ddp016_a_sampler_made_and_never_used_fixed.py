"""ddptrain lint sample ddp016_a_sampler_made_and_never_used: the fixed; `ddptrain lint` finds nothing here."""

import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

dist.init_process_group("gloo")
val_sampler = DistributedSampler(val_set, shuffle=False)  # made, but the loader below does not use it
val_loader = DataLoader(val_set, sampler=None)
correct = evaluate(val_loader)
dist.all_reduce(correct)
