"""ddptrain lint sample ddp018_loader_given_to_accelerate: the fixed; `ddptrain lint` finds nothing here (Accelerate
gives the loader its distributed sampler)."""

import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
from accelerate import Accelerator

dist.init_process_group("gloo")
accelerator = Accelerator()
loader = DataLoader(train_set, batch_size=32, shuffle=True)
model, loader = accelerator.prepare(DDP(net), loader)
for epoch in range(3):
    train(model, loader)
