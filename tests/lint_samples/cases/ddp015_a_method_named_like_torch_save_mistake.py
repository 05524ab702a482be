"""ddptrain lint sample ddp015_a_method_named_like_torch_save: the mistake (lines marked `# expect:` get exactly those findings)."""
import argparse, os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


class FeatureCache:
    def __init__(self, path):
        self.path = path

    def save(self, tensors):
        torch.save(tensors, self.path)  # expect: DDP015


def main():
    dist.init_process_group("gloo")
    cache = FeatureCache("features.pt")
    model = DDP(build_model())
    train(model)
    cache.save(extract(model))
    if dist.get_rank() == 0:
        torch.save(model.module.state_dict(), "final.pt")


if __name__ == "__main__":
    main()
