"""ddptrain lint sample ddp007_loaded_back_through_a_helper: the fixed; `ddptrain lint` finds nothing here."""

import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


def load_checkpoint(args, model, optimizer):
    checkpoint = torch.load(args.resume)
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])


dist.init_process_group("gloo")
model = DDP(net)
if args.resume:
    load_checkpoint(args, model.module, optimizer)  # the plain keys, into the model inside the wrapper
if dist.get_rank() == 0:
    torch.save({"model": model.module.state_dict(), "optimizer": optimizer.state_dict()}, "last.pt")
