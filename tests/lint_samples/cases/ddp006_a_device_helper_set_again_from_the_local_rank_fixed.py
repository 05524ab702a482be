"""ddptrain lint sample ddp006_a_device_helper_set_again_from_the_local_rank: the fixed; `ddptrain lint` finds nothing here."""

import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


def select_device(name=""):
    cuda = name != "cpu" and torch.cuda.is_available()
    return torch.device("cuda:0" if cuda else "cpu")  # the single-process device


opt = parse_options()
device = select_device(opt.device) if not opt.debug else select_device("cpu")
if opt.local_rank != -1:
    torch.cuda.set_device(opt.local_rank)
    device = torch.device("cuda", opt.local_rank)
    dist.init_process_group("nccl")
model = DDP(build().to(device), device_ids=[opt.local_rank])
