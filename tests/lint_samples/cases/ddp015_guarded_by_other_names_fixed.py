"""ddptrain lint sample ddp015_guarded_by_other_names: the fixed; `ddptrain lint` finds nothing here."""

import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


def save_all(model, args, is_main_dev):
    if is_main_dev:
        torch.save(model.module.state_dict(), "a.pt")
    if args.gpu == 0:
        torch.save(model.module.state_dict(), "b.pt")


dist.init_process_group("gloo")
save_all(model, args, dev == 0)
