"""ddptrain lint sample ddp010_helper_that_gathers_only_tensors: the fixed; `ddptrain lint` finds nothing here."""
import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
import statistics


def collect(value, logs):
    if type(value) == torch.Tensor:  # a float (a figure rank 0 already combined) is kept as it is
        gathered = [torch.zeros_like(value) for _ in range(dist.get_world_size())]
        dist.all_gather(gathered, value)
        value = torch.stack(gathered).mean().item()
    logs.append(value)


dist.init_process_group("gloo")
losses = []
for step in range(100):
    loss = train_step()
    collect(loss.detach(), losses)
if dist.get_rank() == 0:
    collect(statistics.mean(losses), losses)
