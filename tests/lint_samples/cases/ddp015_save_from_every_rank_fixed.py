"""ddptrain lint sample ddp015_save_from_every_rank: the fixed; `ddptrain lint` finds nothing here."""
import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
dist.init_process_group("gloo")
for epoch in range(3):
    train(model)
    if dist.get_rank() == 0:
        torch.save(model.module.state_dict(), "checkpoint.pt")
