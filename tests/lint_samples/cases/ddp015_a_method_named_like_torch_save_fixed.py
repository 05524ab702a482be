"""ddptrain lint sample ddp015_a_method_named_like_torch_save: the fixed; `ddptrain lint` finds nothing here."""
import argparse, os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


class FeatureCache:  # its save() is never called: torch.save does not make it run
    def __init__(self, path):
        self.path = path

    def save(self, tensors):
        torch.save(tensors, self.path)


def main():
    dist.init_process_group("gloo")
    cache = FeatureCache("features.pt")
    model = DDP(build_model())
    train(model)
    if dist.get_rank() == 0:
        torch.save(model.module.state_dict(), "final.pt")


if __name__ == "__main__":
    main()
