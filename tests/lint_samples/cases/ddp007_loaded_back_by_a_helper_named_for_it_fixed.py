"""ddptrain lint sample ddp007_loaded_back_by_a_helper_named_for_it: the fixed; `ddptrain lint` finds nothing here."""

import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from utils import model_load_state_dict


dist.init_process_group("gloo")
model = DDP(net)
if args.resume:
    model_load_state_dict(model.module, torch.load(args.resume)["model"])  # into the model inside the wrapper
if dist.get_rank() == 0:
    torch.save({"model": model.module.state_dict()}, "last.pt")
