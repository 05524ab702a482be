"""ddptrain lint sample ddp010_helper_that_broadcasts_called_on_rank0: the mistake (lines marked `# expect:` get exactly those findings)."""
import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
def load_everywhere(path):
    data = read(path)
    dist.broadcast_object_list([data], src=0)
    return data
if dist.get_rank() == 0:
    state = load_everywhere(path)  # expect: DDP010
