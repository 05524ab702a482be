"""ddptrain lint sample ddp007_loaded_back_through_a_helper: the mistake (lines marked `# expect:` get exactly those findings)."""

import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


def load_weights(args, net):
    net.load_state_dict(torch.load(args.weights))


dist.init_process_group("gloo")
load_weights(args, net)  # into the plain model: a file this program saved from the wrapper has prefixed keys
model = DDP(net)
if dist.get_rank() == 0:
    torch.save(model.state_dict(), "last.pt")  # expect: DDP007
