"""ddptrain lint sample ddp007_a_wrapper_made_at_the_top_level_saved_in_a_function: the fixed; `ddptrain lint` finds nothing here."""
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def train(epochs):
    for epoch in range(epochs):
        if dist.get_rank() == 0:
            torch.save({"epoch": epoch, "model": model.module.state_dict()}, f"model_{epoch:06d}.ckpt")


dist.init_process_group("gloo")
model = DistributedDataParallel(torch.nn.Linear(4, 2))
train(3)
