"""ddptrain lint sample ddp017_metric_returned_and_logged_by_the_caller: the mistake (lines marked `# expect:` get exactly those findings)."""
import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


def evaluate(model, loader):
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for x, y in loader:
            correct += (model(x).argmax(1) == y).sum().item()
            total += len(y)
    return correct / total


def main():
    dist.init_process_group("gloo")
    val_loader = DataLoader(val_set, batch_size=64, sampler=DistributedSampler(val_set, shuffle=False))
    for epoch in range(10):
        train_one_epoch(model, train_loader)
        val_acc = evaluate(model, val_loader)
        if dist.get_rank() == 0:
            print(f"epoch {epoch} val accuracy {val_acc:.3f}")  # expect: DDP017


if __name__ == "__main__":
    main()
