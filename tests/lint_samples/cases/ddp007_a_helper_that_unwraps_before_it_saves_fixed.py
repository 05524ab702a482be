"""ddptrain lint sample ddp007_a_helper_that_unwraps_before_it_saves: the fixed; `ddptrain lint` finds nothing here."""
import argparse

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def save_checkpoint(model, args, filename="last.pth"):
    if args.distributed:
        model = model.module  # the model inside the wrapper: plain keys
    torch.save(model.state_dict(), filename)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--distributed", action="store_true")
    args = parser.parse_args()
    model = torch.nn.Linear(4, 2)
    if args.distributed:
        dist.init_process_group("gloo")
        model = DDP(model)
    for epoch in range(3):
        if not args.distributed or dist.get_rank() == 0:
            save_checkpoint(model, args)
