"""ddptrain lint sample ddp013_the_global_rank_passed_to_the_training_function: the mistake (lines marked `# expect:` get exactly those findings)."""

import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


def train(rank, world_size):
    dist.init_process_group("nccl", rank=rank, world_size=world_size)
    torch.cuda.set_device(rank)  # expect: DDP013
    model = DDP(net.cuda(), device_ids=[rank])  # expect: DDP013
    model.train()  # a method of the same name: not a call of this function


if __name__ == "__main__":
    rank = int(os.environ["RANK"])  # the job's rank: 8..15 on a second node of 8 GPUs
    train(rank, int(os.environ["WORLD_SIZE"]))
