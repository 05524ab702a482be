"""ddptrain lint sample ddp016_padded_evaluation: the fixed; `ddptrain lint` finds nothing here."""
import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
val_loader = DataLoader(val_set, sampler=ExactEvalSampler(len(val_set), rank, world))
correct = evaluate(model, val_loader)
dist.all_reduce(correct)
