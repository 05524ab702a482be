"""ddptrain lint sample ddp018_shuffle_in_the_distributed_arm: the mistake (lines marked `# expect:` get exactly those findings)."""
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
        loader = DataLoader(train_set, batch_size=opts.batch_size // dist.get_world_size(), shuffle=True)  # expect: DDP018
    else:
        model = build_model()
        loader = DataLoader(train_set, batch_size=opts.batch_size, shuffle=True)  # one process: right
    for epoch in range(10):
        train_one_epoch(model, loader)
