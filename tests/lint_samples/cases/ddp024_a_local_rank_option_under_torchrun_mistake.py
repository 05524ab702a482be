"""ddptrain lint sample ddp024_a_local_rank_option_under_torchrun: the mistake (lines marked `# expect:` get exactly those findings).

Launched with: torchrun --nproc_per_node=4 train.py
"""
import argparse
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

parser = argparse.ArgumentParser()
parser.add_argument("--local_rank", type=int, default=0)  # torchrun never passes it
args = parser.parse_args()

torch.cuda.set_device(args.local_rank)  # expect: DDP024
dist.init_process_group("nccl")
model = DDP(nn.Linear(2, 2).cuda(), device_ids=[args.local_rank])
