"""ddptrain lint sample ddp017_metric_logged_unreduced: the fixed; `ddptrain lint` finds nothing here."""
import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
dist.init_process_group("gloo")
# each index on one rank, no padding: the summed counts are exact
val_part = torch.utils.data.Subset(val_set, range(dist.get_rank(), len(val_set), dist.get_world_size()))
val_loader = DataLoader(val_part)
def evaluate(model, loader):
    model.eval()
    correct = torch.zeros(1)
    with torch.no_grad():
        for x, y in loader:
            correct += (model(x).argmax(1) == y).sum()
    dist.all_reduce(correct)
    if dist.get_rank() == 0:
        print(f"val accuracy {correct.item() / len(loader.dataset)}")
