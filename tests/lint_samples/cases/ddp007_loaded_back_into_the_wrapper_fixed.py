"""ddptrain lint sample ddp007_loaded_back_into_the_wrapper: the fixed; `ddptrain lint` finds nothing here."""

import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
dist.init_process_group("gloo")
model = DDP(net)
if args.resume:
    model.module.load_state_dict(torch.load("last.pt"))  # the plain keys, into the model inside the wrapper
if dist.get_rank() == 0:
    torch.save(model.module.state_dict(), "last.pt")  # loads into the plain model too
