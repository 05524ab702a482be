"""ddptrain lint sample ddp007_the_program_strips_the_prefix: the mistake (lines marked `# expect:` get exactly those findings)."""

import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

dist.init_process_group("gloo")
model = DDP(net)
if dist.get_rank() == 0:
    torch.save(model.state_dict(), "m.pt")  # expect: DDP007
