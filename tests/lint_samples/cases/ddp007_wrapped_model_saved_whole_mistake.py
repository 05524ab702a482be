"""ddptrain lint sample ddp007_wrapped_model_saved_whole: the mistake (lines marked `# expect:` get exactly those findings)."""
import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


def main(local_rank):
    model = DDP(build_model().cuda(local_rank), device_ids=[local_rank])
    train(model)
    if dist.get_rank() == 0:
        torch.save(model, "final.pt")  # expect: DDP007
