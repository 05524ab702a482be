"""ddptrain lint sample ddp018_shuffle_in_the_distributed_arm: the fixed; `ddptrain lint` finds nothing here."""
import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


def main(opts):
    if opts.dist_mode == "ddp":
        dist.init_process_group("gloo")
        model = DDP(build_model())
        sampler = DistributedSampler(train_set, shuffle=True)
        loader = DataLoader(train_set, batch_size=opts.batch_size // dist.get_world_size(), sampler=sampler)
    else:
        model = build_model()
        loader = DataLoader(train_set, batch_size=opts.batch_size, shuffle=True)  # one process: right
    for epoch in range(10):
        if opts.dist_mode == "ddp":
            sampler.set_epoch(epoch)
        train_one_epoch(model, loader)
