"""ddptrain lint sample ddp011_a_port_set_only_when_unset: the fixed; `ddptrain lint` finds nothing here."""

import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


if "MASTER_PORT" not in os.environ:
    os.environ["MASTER_PORT"] = "29500"  # a default: torchrun's or mpirun's port wins
if not os.environ.get("MASTER_PORT"):
    os.environ["MASTER_PORT"] = "29500"
dist.init_process_group("nccl")
