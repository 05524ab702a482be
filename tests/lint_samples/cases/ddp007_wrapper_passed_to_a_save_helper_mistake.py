"""ddptrain lint sample ddp007_wrapper_passed_to_a_save_helper: the mistake (lines marked `# expect:` get exactly those findings)."""
import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


def save_model(path, model, optimizer):
    if isinstance(model, nn.DataParallel):
        torch.save(model.module.state_dict(), path)
    else:
        torch.save(model.state_dict(), path)


def main(local_rank):
    model = DDP(build_model().cuda(local_rank), device_ids=[local_rank])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    train(model, optimizer)
    if dist.get_rank() == 0:
        save_model("final.pt", model, optimizer)  # expect: DDP007 (no fix): the helper also saves plain models
