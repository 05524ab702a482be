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
    model.load_state_dict(torch.load("last.pt"))  # its own files, back into the wrapper: the prefix matches
if dist.get_rank() == 0:
    torch.save(model.state_dict(), "last.pt")
