"""ddptrain lint sample ddp001_a_single_process_baseline: the fixed; `ddptrain lint` finds nothing here."""

import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

model = nn.DataParallel(net)  # a single-process baseline beside the DDP scripts: no multi-process path here
