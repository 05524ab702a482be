"""ddptrain lint sample ddp016_a_sampler_made_and_never_used: the mistake (lines marked `# expect:` get exactly those findings)."""

import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

dist.init_process_group("gloo")
val_sampler = DistributedSampler(val_set, shuffle=False)  # expect: DDP016
val_loader = DataLoader(val_set, sampler=val_sampler)
correct = evaluate(val_loader)
dist.all_reduce(correct)
