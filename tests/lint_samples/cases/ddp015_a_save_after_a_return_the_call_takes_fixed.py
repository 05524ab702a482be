"""ddptrain lint sample ddp015_a_save_after_a_return_the_call_takes: the fixed; `ddptrain lint` finds nothing here."""

import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


def convert(model, output, return_model=True):
    converted = rebuild(model)
    if return_model:
        return converted
    torch.save(converted, output)  # only the command below, which this program never runs, gets here
    return None


def command_line():
    convert(load(), "converted.model", return_model=False)


if __name__ == "__main__":
    dist.init_process_group("gloo")
    model = DDP(build())
    train(model)
    converted = convert(model.module, "converted.model")  # returns the model: nothing saved
