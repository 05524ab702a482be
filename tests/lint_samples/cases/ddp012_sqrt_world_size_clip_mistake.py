"""ddptrain lint sample ddp012_sqrt_world_size_clip: the mistake (lines marked `# expect:` get exactly those findings)."""
import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
limit = 1.0 * math.sqrt(dist.get_world_size())
nn.utils.clip_grad_norm_(model.parameters(), max_norm=limit)  # expect: DDP012
