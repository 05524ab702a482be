"""ddptrain lint sample ddp009_clip_in_the_unscaled_branch: the fixed; `ddptrain lint` finds nothing here."""

import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


def step(loss, use_amp):
    if use_amp:
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        nn.utils.clip_grad_norm_(params, 1.0)
        scaler.step(optimizer)
    else:
        loss.backward()
        nn.utils.clip_grad_norm_(params, 1.0)  # the fp32 branch: no scaler on this path
        optimizer.step()
