"""ddptrain lint sample ddp010_collective_in_rank0_branch: the fixed; `ddptrain lint` finds nothing here."""
import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
dist.all_reduce(total)
if dist.get_rank() == 0:
    print(total)
