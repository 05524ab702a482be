"""ddptrain lint sample ddp010_collective_in_rank0_branch: the mistake (lines marked `# expect:` get exactly those findings)."""
import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
if dist.get_rank() == 0:
    dist.all_reduce(total)  # expect: DDP010
    print(total)
