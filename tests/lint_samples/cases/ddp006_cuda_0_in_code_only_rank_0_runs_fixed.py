"""ddptrain lint sample ddp006_cuda_0_in_code_only_rank_0_runs: the fixed; `ddptrain lint` finds nothing here."""

import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


def activations(images):
    inception.to("cuda:0")  # rank 0 alone runs this: its GPU is GPU 0
    return inception(images.to("cuda:0"))


def statistics(images):
    return activations(images).mean(0)


def fid(images):
    return distance(statistics(images), reference)


def validate(generator):
    return fid(generator(noise))


local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
dist.init_process_group("nccl")
generator = DDP(build().cuda(), device_ids=[local_rank])
if dist.get_rank() == 0:
    score = validate(generator.module)
