"""ddptrain lint sample ddp017_every_rank_evaluates_the_whole_set: the fixed; `ddptrain lint` finds nothing here."""
import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


def evaluate(model, loader):
    model.eval()
    correct = 0
    with torch.no_grad():
        for x, y in loader:
            correct += (model(x).argmax(1) == y).sum().item()
    if dist.get_rank() == 0:
        print(f"val accuracy {correct / len(loader.dataset)}")


def main():
    dist.init_process_group("gloo")
    train_loader = DataLoader(train_set, batch_size=32, sampler=DistributedSampler(train_set))
    val_loader = DataLoader(val_set, batch_size=64)  # every rank evaluates the whole set: rank 0's figure is whole
    for epoch in range(10):
        train_loader.sampler.set_epoch(epoch)
        train_one_epoch(model, train_loader)
        evaluate(model, val_loader)


if __name__ == "__main__":
    main()
