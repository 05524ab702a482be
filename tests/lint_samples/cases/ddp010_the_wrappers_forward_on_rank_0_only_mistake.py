"""ddptrain lint sample ddp010_the_wrappers_forward_on_rank_0_only: the mistake (lines marked `# expect:` get exactly those findings)."""

import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


def evaluate(model, loader):
    model.eval()
    with torch.no_grad():
        return sum((model(x).argmax(1) == y).sum().item() for x, y in loader)


dist.init_process_group("nccl")
torch.cuda.set_device(local_rank)
ddp_model = DDP(resnet18().cuda(), device_ids=[local_rank])
for epoch in range(10):
    train_one_epoch(ddp_model, train_loader)
    if dist.get_rank() == 0:
        accuracy = evaluate(model=ddp_model, loader=test_loader)  # expect: DDP010
        preview = ddp_model(sample)  # expect: DDP010
