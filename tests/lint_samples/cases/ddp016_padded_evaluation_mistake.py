"""ddptrain lint sample ddp016_padded_evaluation: the mistake (lines marked `# expect:` get exactly those findings)."""
import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
val_loader = DataLoader(val_set, sampler=DistributedSampler(val_set, shuffle=False))  # expect: DDP016
correct = evaluate(model, val_loader)
dist.all_reduce(correct)
