"""ddptrain lint sample ddp007_wrapped_state_saved: the mistake (lines marked `# expect:` get exactly those findings)."""
import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
model = DDP(net)
torch.save(model.state_dict(), "m.pt")  # expect: DDP007 DDP015
