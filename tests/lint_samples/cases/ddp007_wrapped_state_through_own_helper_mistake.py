"""ddptrain lint sample ddp007_wrapped_state_through_own_helper: the mistake (lines marked `# expect:` get exactly those findings)."""
import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
model = DDP(net)
save_checkpoint({"epoch": 3, "state_dict": model.state_dict()}, is_best)  # expect: DDP007
