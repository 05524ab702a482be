"""ddptrain lint sample ddp014_break_decided_on_rank0: the fixed; `ddptrain lint` finds nothing here."""
import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
for epoch in range(100):
    train_one_epoch(model, loader)
    stop = [early_stopper(validate(model)) if dist.get_rank() == 0 else None]
    dist.broadcast_object_list(stop, src=0)
    if stop[0]:
        break
