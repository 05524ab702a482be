"""ddptrain lint sample ddp014_break_decided_on_rank0: the mistake (lines marked `# expect:` get exactly those findings)."""
import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
for epoch in range(100):
    train_one_epoch(model, loader)
    if dist.get_rank() == 0:
        if early_stopper(validate(model)):
            break  # expect: DDP014
