"""ddptrain lint sample ddp010_paired_barrier: the fixed; `ddptrain lint` finds nothing here."""
import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
if rank != 0:
    dist.barrier()
prepare_dataset()
if rank == 0:
    dist.barrier()
