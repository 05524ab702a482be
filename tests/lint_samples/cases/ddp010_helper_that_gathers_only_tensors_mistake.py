"""ddptrain lint sample ddp010_helper_that_gathers_only_tensors: the mistake (lines marked `# expect:` get exactly those findings)."""
import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
import statistics


def collect(value, logs):
    gathered = [torch.zeros_like(value) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, value)
    logs.append(torch.stack(gathered).mean().item())


dist.init_process_group("gloo")
losses = []
for step in range(100):
    loss = train_step()
    collect(loss.detach(), losses)
if dist.get_rank() == 0:
    collect(torch.tensor(statistics.mean(losses)), losses)  # expect: DDP010
