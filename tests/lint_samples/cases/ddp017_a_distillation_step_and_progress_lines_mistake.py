"""ddptrain lint sample ddp017_a_distillation_step_and_progress_lines: the mistake (lines marked `# expect:` get exactly those findings)."""

import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


dist.init_process_group("gloo")
student = DDP(build_student())
val_loader = DataLoader(val_set, sampler=DistributedSampler(val_set, shuffle=False))

def validate(model, loader):
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for x, y in loader:
            correct += (model(x).argmax(1) == y).sum().item()
            total += len(y)
    acc = correct / total
    print(f"Test acc {acc:.3f}")  # expect: DDP017
    return acc


validate(student, val_loader)
