"""ddptrain lint sample ddp015_not_mp_or_rank0_is_every_rank: the fixed; `ddptrain lint` finds nothing here."""
import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
dist.init_process_group("gloo")
def save_checkpoint(state, path):
    torch.save(state, path)
if args.rank == 0:
    save_checkpoint(state, "checkpoint.pt")
