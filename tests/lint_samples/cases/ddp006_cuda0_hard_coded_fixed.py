"""ddptrain lint sample ddp006_cuda0_hard_coded: the fixed; `ddptrain lint` finds nothing here."""
import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
dist.init_process_group("gloo")
model = DDP(net, device_ids=[local_rank])
x = x.to(f"cuda:{local_rank}")
