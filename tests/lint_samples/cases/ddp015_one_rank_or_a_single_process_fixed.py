"""ddptrain lint sample ddp015_one_rank_or_a_single_process: the fixed; `ddptrain lint` finds nothing here."""

import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


dist.init_process_group("gloo")
for epoch in range(10):
    train_one_epoch(model, loader)
    if device == 0 or not args.distributed:  # one process where there are several: the other arm needs one
        torch.save(model.module.state_dict(), "best.pth")
