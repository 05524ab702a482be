"""ddptrain lint sample ddp007_wrapped_state_saved: the fixed; `ddptrain lint` finds nothing here."""
import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
model = DDP(net)
if rank == 0:
    torch.save({"model": model.module.state_dict()}, "m.pt")
