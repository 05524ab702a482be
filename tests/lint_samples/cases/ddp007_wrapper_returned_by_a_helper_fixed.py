"""ddptrain lint sample ddp007_wrapper_returned_by_a_helper: the fixed; `ddptrain lint` finds nothing here."""
import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


def wrap(model, local_rank):
    model = model.cuda(local_rank)
    ddp_model = DDP(model, device_ids=[local_rank])
    return ddp_model


def main(local_rank):
    model = wrap(build_model(), local_rank)
    train(model)
    if dist.get_rank() == 0:
        torch.save(model.module.state_dict(), "final.pt")
