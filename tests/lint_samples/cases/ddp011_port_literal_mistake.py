"""ddptrain lint sample ddp011_port_literal: the mistake (lines marked `# expect:` get exactly those findings)."""
import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
os.environ["MASTER_PORT"] = "12355"  # expect: DDP011
dist.init_process_group("gloo")  # the process group that reads the port
