"""ddptrain lint sample ddp015_guarded_by_other_names: the mistake (lines marked `# expect:` get exactly those findings)."""

import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


def save_all(model, args, is_main_dev):
    torch.save(model.module.state_dict(), "a.pt")  # expect: DDP015


dist.init_process_group("gloo")
save_all(model, args, dev == 0)
