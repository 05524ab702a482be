"""ddptrain lint sample ddp015_a_branch_the_unguarded_call_does_not_take: the mistake (lines marked `# expect:` get exactly those findings)."""

import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


def save_checkpoint(model, epoch, last=False):
    state = {"model": model.module.state_dict(), "epoch": epoch}
    if last:
        torch.save(state, f"ckpt_last.rank{dist.get_rank()}.pt")
    else:
        torch.save(state, f"ckpt_{epoch}.pth")  # expect: DDP015


dist.init_process_group("nccl")
for epoch in range(10):
    train_one_epoch(model, loader)
    if dist.get_rank() == 0:
        save_checkpoint(model, epoch)
save_checkpoint(model, 10, last=False)  # every rank, into the branch above
