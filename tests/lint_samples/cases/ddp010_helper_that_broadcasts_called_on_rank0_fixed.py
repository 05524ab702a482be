"""ddptrain lint sample ddp010_helper_that_broadcasts_called_on_rank0: the fixed; `ddptrain lint` finds nothing here."""
import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
def load_everywhere(path):
    data = read(path) if dist.get_rank() == 0 else None
    holder = [data]
    dist.broadcast_object_list(holder, src=0)
    return holder[0]
state = load_everywhere(path)
