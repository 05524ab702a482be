"""ddptrain lint sample ddp001_dataparallel: the mistake (lines marked `# expect:` get exactly those findings)."""
import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
model = nn.DataParallel(net)  # expect: DDP001
dist.init_process_group("gloo")  # the multi-process path exists
