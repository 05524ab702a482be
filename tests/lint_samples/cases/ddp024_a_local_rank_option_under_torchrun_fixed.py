"""ddptrain lint sample ddp024_a_local_rank_option_under_torchrun: the fixed; `ddptrain lint` finds nothing here.

Launched with: torchrun --nproc_per_node=4 train.py
"""
import argparse
import os
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

parser = argparse.ArgumentParser()
parser.add_argument("--local_rank", type=int, default=int(os.environ.get("LOCAL_RANK", 0)))
args = parser.parse_args()

torch.cuda.set_device(args.local_rank)
dist.init_process_group("nccl")
model = DDP(nn.Linear(2, 2).cuda(), device_ids=[args.local_rank])
