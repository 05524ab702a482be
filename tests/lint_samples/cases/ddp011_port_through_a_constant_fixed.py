"""ddptrain lint sample ddp011_port_through_a_constant: the fixed; `ddptrain lint` finds nothing here."""
import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
PORT = 29500
os.environ.setdefault("MASTER_PORT", str(PORT))
dist.init_process_group("gloo")  # the process group that reads the port
