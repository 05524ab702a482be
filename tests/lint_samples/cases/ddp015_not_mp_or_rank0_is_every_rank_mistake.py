"""ddptrain lint sample ddp015_not_mp_or_rank0_is_every_rank: the mistake (lines marked `# expect:` get exactly those findings)."""
import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
dist.init_process_group("gloo")
def save_checkpoint(state, path):
    torch.save(state, path)  # expect: DDP015
if not args.multiprocessing_distributed or args.rank % ngpus == 0:
    save_checkpoint(state, "checkpoint.pt")
