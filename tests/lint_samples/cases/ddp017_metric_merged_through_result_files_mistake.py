"""ddptrain lint sample ddp017_metric_merged_through_result_files: the mistake (lines marked `# expect:` get exactly those findings)."""
import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
import pickle

dist.init_process_group("gloo")
val_loader = DataLoader(val_set, sampler=DistributedSampler(val_set, shuffle=False, drop_last=True))


def evaluate(model, loader):
    model.eval()
    correct = 0
    with torch.no_grad():
        for x, y in loader:
            correct += (model(x).argmax(1) == y).sum().item()
    if dist.get_rank() == 0:
        print(f"val accuracy {correct / len(loader.dataset)}")  # expect: DDP017
