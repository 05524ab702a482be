"""ddptrain lint sample ddp003_shuffle_and_sampler: the fixed; `ddptrain lint` finds nothing here."""
import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
loader = DataLoader(ds, sampler=sampler)
