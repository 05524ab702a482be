"""ddptrain lint sample ddp001_dataparallel_outside_the_fallback: the fixed; `ddptrain lint` finds nothing here."""
import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
if args.distributed:
    model = DDP(net, device_ids=[args.gpu])
else:
    model = nn.DataParallel(net)
dist.init_process_group("gloo")  # the multi-process path exists
