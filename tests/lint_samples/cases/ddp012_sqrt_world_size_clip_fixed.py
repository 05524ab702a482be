"""ddptrain lint sample ddp012_sqrt_world_size_clip: the fixed; `ddptrain lint` finds nothing here."""
import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
limit = 1.0
nn.utils.clip_grad_norm_(model.parameters(), max_norm=limit)
