"""ddptrain lint sample ddp001_a_single_process_baseline: the mistake (lines marked `# expect:` get exactly those findings)."""

import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

dist.init_process_group("gloo")  # a multi-process path in the same program
model = nn.DataParallel(net)  # expect: DDP001
