"""ddptrain lint sample ddp018_single_process_path_or_own_shard: the fixed; `ddptrain lint` finds nothing here."""

import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


def loaders(args, train_set, unlabeled_set):
    if args.distributed:
        sampler = DistributedSampler(train_set)
        train = DataLoader(train_set, batch_size=32, sampler=sampler)
    else:
        train = DataLoader(train_set, batch_size=32, shuffle=True)
    part = train_set.shard(num_shards=dist.get_world_size(), index=dist.get_rank())
    own = DataLoader(part, batch_size=32, shuffle=True)
    extra = DataLoader(unlabeled_set, batch_size=32, sampler=DistributedSampler(unlabeled_set, shuffle=True))
    val_loader = DataLoader(val_set, batch_size=64, shuffle=True)  # every rank evaluates all of it: slow, not wrong
    for epoch in range(10):
        if args.distributed:
            sampler.set_epoch(epoch)
        run_epoch(train, own, extra, val_loader)


dist.init_process_group("gloo")
