"""ddptrain lint sample ddp006_a_device_helper_set_again_from_the_local_rank: the mistake (lines marked `# expect:` get exactly those findings)."""

import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


def select_device(name=""):
    cuda = name != "cpu" and torch.cuda.is_available()
    return torch.device("cuda:0" if cuda else "cpu")  # expect: DDP006


opt = parse_options()
dist.init_process_group("gloo")
device = select_device(opt.device)  # every rank on GPU 0
model = DDP(build().to(device))
