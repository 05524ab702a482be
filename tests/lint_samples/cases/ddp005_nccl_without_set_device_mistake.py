"""ddptrain lint sample ddp005_nccl_without_set_device: the mistake (lines marked `# expect:` get exactly those findings)."""
import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
dist.init_process_group("nccl")  # expect: DDP005
model = DDP(nn.Linear(2, 2).cuda())  # every rank builds its model on GPU 0
