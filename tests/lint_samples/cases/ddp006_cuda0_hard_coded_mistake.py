"""ddptrain lint sample ddp006_cuda0_hard_coded: the mistake (lines marked `# expect:` get exactly those findings)."""
import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
dist.init_process_group("gloo")
model = DDP(net, device_ids=[0])  # expect: DDP006
x = x.to("cuda:0")  # expect: DDP006
