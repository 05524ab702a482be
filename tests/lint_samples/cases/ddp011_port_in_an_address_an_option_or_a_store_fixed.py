"""ddptrain lint sample ddp011_port_in_an_address_an_option_or_a_store: the fixed; `ddptrain lint` finds nothing here."""
import argparse, os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


def parse():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dist-url", default="env://", help="e.g. tcp://host:port")
    parser.add_argument("--master-port", type=int, default=None)  # None: the launcher's
    return parser.parse_args()


def setup(args, rank, world_size):
    if args.multi_node:
        args.dist_url = f"tcp://{args.host}:{args.master_port}"
    os.environ.setdefault("MASTER_PORT", str(args.master_port))
    store = dist.TCPStore(args.host, args.master_port + 1, world_size, rank == 0)
    dist.init_process_group("gloo", init_method=args.dist_url, rank=rank, world_size=world_size)
