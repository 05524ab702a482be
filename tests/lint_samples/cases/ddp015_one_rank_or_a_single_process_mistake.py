"""ddptrain lint sample ddp015_one_rank_or_a_single_process: the mistake (lines marked `# expect:` get exactly those findings)."""

import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


dist.init_process_group("gloo")
for epoch in range(10):
    train_one_epoch(model, loader)
    if device == 0 or args.save_on_every_rank:  # the other arm may hold on every rank
        torch.save(model.module.state_dict(), "best.pth")  # expect: DDP015
