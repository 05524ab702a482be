"""ddptrain lint sample ddp010_paired_barrier: the mistake (lines marked `# expect:` get exactly those findings)."""
import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
if rank == 0:
    dist.barrier()  # expect: DDP010
