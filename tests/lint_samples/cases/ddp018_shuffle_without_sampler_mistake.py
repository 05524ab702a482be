"""ddptrain lint sample ddp018_shuffle_without_sampler: the mistake (lines marked `# expect:` get exactly those findings)."""

import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

dist.init_process_group("gloo")
model = DDP(net)
loader = DataLoader(train_set, batch_size=32, shuffle=True)  # expect: DDP018
for epoch in range(10):
    for batch in loader:
        step(model, batch)
