"""ddptrain lint sample ddp011_port_in_an_address_an_option_or_a_store: the mistake (lines marked `# expect:` get exactly those findings)."""
import argparse, os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


def parse():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dist-url", default="tcp://127.0.0.1:23456", help="e.g. tcp://host:port")  # expect: DDP011
    parser.add_argument("--master-port", type=int, default=12355)  # expect: DDP011
    return parser.parse_args()


def setup(args, rank, world_size):
    if args.multi_node:
        args.dist_url = f"tcp://{args.host}:58472"  # expect: DDP011
    port = "29500"
    os.environ["MASTER_PORT"] = port  # expect: DDP011
    store = dist.TCPStore(args.host, 29501, world_size, rank == 0)  # expect: DDP011
    dist.init_process_group("gloo", init_method=args.dist_url, rank=rank, world_size=world_size)
