"""ddptrain lint sample ddp008_weights_only_false: the mistake (lines marked `# expect:` get exactly those findings)."""
import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
state = torch.load("m.pt", map_location="cpu", weights_only=False)  # expect: DDP008
