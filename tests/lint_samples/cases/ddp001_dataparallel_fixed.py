"""ddptrain lint sample ddp001_dataparallel: the fixed; `ddptrain lint` finds nothing here."""
import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
model = DDP(net.to(device), device_ids=[local_rank])
dist.init_process_group("gloo")  # the multi-process path exists
