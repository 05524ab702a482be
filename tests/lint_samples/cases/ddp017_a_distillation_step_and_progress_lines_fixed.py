"""ddptrain lint sample ddp017_a_distillation_step_and_progress_lines: the fixed; `ddptrain lint` finds nothing here."""

import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


dist.init_process_group("gloo")
student = DDP(build_student())
val_loader = DataLoader(val_set, sampler=DistributedSampler(val_set, shuffle=False, drop_last=True))  # no padded copies

def train_distill(student, teacher, loader, optimizer):
    teacher.eval()
    for idx, (x, y) in enumerate(loader):
        with torch.no_grad():
            soft = teacher(x)
        loss = distill_loss(student(x), soft, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"Epoch loss {loss.item():.3f} acc {accuracy(soft, y):.3f}")  # training progress


def validate(model, loader):
    model.eval()
    correct = torch.zeros(2)
    with torch.no_grad():
        for idx, (x, y) in enumerate(loader):
            correct += torch.tensor([(model(x).argmax(1) == y).sum().item(), len(y)])
            if idx % 10 == 0:
                print(f"Test: [{idx}] acc {correct[0] / correct[1]:.3f}")  # this rank's progress so far
    dist.all_reduce(correct)
    acc = correct[0] / correct[1]
    print(f"Test acc {acc:.3f}")
    return acc


train_distill(student, teacher, train_loader, optimizer)
validate(student, val_loader)
