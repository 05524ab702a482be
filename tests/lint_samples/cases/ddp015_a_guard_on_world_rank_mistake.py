"""ddptrain lint sample ddp015_a_guard_on_world_rank: the mistake (lines marked `# expect:` get exactly those findings)."""

import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


WORLD_RANK = int(os.environ["RANK"])
dist.init_process_group("gloo")
for epoch in range(10):
    train_one_epoch(model, loader)
    torch.save(model.module.state_dict(), "last.pt")  # expect: DDP015
