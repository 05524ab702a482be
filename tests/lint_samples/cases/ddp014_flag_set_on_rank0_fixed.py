"""ddptrain lint sample ddp014_flag_set_on_rank0: the fixed; `ddptrain lint` finds nothing here."""
import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
for epoch in range(100):
    train_one_epoch(model, loader)
    if rank == 0:
        stop = patience_over(history)
    flag = [stop if rank == 0 else None]
    dist.broadcast_object_list(flag, 0)
    stop = flag[0]
    if stop:
        break
