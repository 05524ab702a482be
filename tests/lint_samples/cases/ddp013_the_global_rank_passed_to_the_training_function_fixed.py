"""ddptrain lint sample ddp013_the_global_rank_passed_to_the_training_function: the fixed; `ddptrain lint` finds nothing here."""

import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


def train(rank, world_size):
    dist.init_process_group("nccl", rank=rank, world_size=world_size)
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    model = DDP(net.cuda(), device_ids=[local_rank])


def spawned(index, world_size):
    torch.cuda.set_device(index)  # mp.spawn's process index: the local rank on this node
    model = DDP(net.cuda(), device_ids=[index])


if __name__ == "__main__":
    train(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]))
    torch.multiprocessing.spawn(spawned, args=(torch.cuda.device_count(),), nprocs=torch.cuda.device_count())
    spawned(int(os.environ["RANK"]), 1)  # also called directly, but handed to mp.spawn above: its index is local
