"""ddptrain lint sample ddp007_wrapped_state_through_own_helper: the fixed; `ddptrain lint` finds nothing here."""
import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
save_checkpoint({"epoch": 0, "state_dict": model.state_dict()}, False)
model = DDP(model)
