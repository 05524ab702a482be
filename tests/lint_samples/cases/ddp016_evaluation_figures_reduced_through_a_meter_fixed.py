"""ddptrain lint sample ddp016_evaluation_figures_reduced_through_a_meter: the fixed; `ddptrain lint` finds nothing here."""

import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


val_sampler = DistributedSampler(val_set, shuffle=False, drop_last=True)  # no repeated images: each counted once
val_loader = DataLoader(val_set, sampler=val_sampler)
for epoch in range(10):
    train_one_epoch(model, train_loader)
    accuracy = validate(model, val_loader)
    meter.update(accuracy)
    meter.all_reduce()  # the figures the evaluation returned, combined over ranks
