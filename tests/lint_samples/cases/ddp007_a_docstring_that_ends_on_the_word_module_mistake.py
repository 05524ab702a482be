"""ddptrain lint sample ddp007_a_docstring_that_ends_on_the_word_module: the mistake (lines marked `# expect:` get exactly those findings)."""

import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


class Encoder(nn.Module):
    """Looks item ids up in the embedding module."""


dist.init_process_group("gloo")
model = DDP(Encoder())
train(model)
if dist.get_rank() == 0:
    torch.save({"model_state_dict": model.state_dict()}, "ckpt.pt")  # expect: DDP007
