"""ddptrain lint sample ddp015_saved_at_the_end_of_main: the fixed; `ddptrain lint` finds nothing here."""
import argparse
import os
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def is_master(args):
    return args.rank == 0


def main(device, args):
    args.rank = device
    dist.init_process_group("gloo", rank=args.rank, world_size=args.world_size)
    model = DDP(nn.Linear(8, 2))
    model(torch.zeros(4, 8)).sum().backward()
    args.save_logs = args.logs != "none" and is_master(args)
    if args.save_logs:
        torch.save(model.module.state_dict(), "final.pt")
    if not args.no_save and device == 0:
        torch.save(model.module.state_dict(), "last.pt")


def run(args):
    if args.distributed:
        main(int(os.environ["LOCAL_RANK"]), args)
    else:
        torch.save(nn.Linear(8, 2).state_dict(), "final.pt")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--logs", default="logs")
    parser.add_argument("--no-save", action="store_true")
    parser.add_argument("--distributed", action="store_true")
    parser.add_argument("--world-size", type=int, default=2)
    run(parser.parse_args())
