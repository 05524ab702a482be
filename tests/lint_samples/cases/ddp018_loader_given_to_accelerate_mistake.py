"""ddptrain lint sample ddp018_loader_given_to_accelerate: the mistake (lines marked `# expect:` get exactly those findings):
the same loader, never handed to Accelerate."""

import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

dist.init_process_group("gloo")
loader = DataLoader(train_set, batch_size=32, shuffle=True)  # expect: DDP018
model = DDP(net)
for epoch in range(3):
    train(model, loader)
