"""ddptrain lint sample ddp007_loaded_back_into_the_wrapper: the mistake (lines marked `# expect:` get exactly those findings)."""

import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
dist.init_process_group("gloo")
model = DDP(net)
if dist.get_rank() == 0:
    torch.save(model.state_dict(), "last.pt")  # expect: DDP007
net.load_state_dict(torch.load("last.pt"))  # into the plain model: the prefixed keys do not match
