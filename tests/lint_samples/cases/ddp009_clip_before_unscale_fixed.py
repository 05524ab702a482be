"""ddptrain lint sample ddp009_clip_before_unscale: the fixed; `ddptrain lint` finds nothing here."""
import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
def step(loss):
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    nn.utils.clip_grad_norm_(params, 1.0)
    scaler.step(optimizer)
