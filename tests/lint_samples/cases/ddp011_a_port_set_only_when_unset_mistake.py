"""ddptrain lint sample ddp011_a_port_set_only_when_unset: the mistake (lines marked `# expect:` get exactly those findings)."""

import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


if "MASTER_ADDR" not in os.environ:
    os.environ["MASTER_PORT"] = "29500"  # expect: DDP011
dist.init_process_group("nccl")
