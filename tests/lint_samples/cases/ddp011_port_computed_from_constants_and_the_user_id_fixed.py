"""ddptrain lint sample ddp011_port_computed_from_constants_and_the_user_id: the fixed; `ddptrain lint` finds nothing here."""
import os, math, sys, argparse, socket
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker(rank, args):
    dist.init_process_group("gloo", init_method=args.dist_url, world_size=args.n_gpu, rank=rank)
    model = DDP(nn.Linear(2, 2))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--n_gpu", type=int, default=2)
    port = free_port()  # a port nothing else holds now
    parser.add_argument("--dist_url", default=f"tcp://127.0.0.1:{port}")
    args = parser.parse_args()
    mp.spawn(worker, nprocs=args.n_gpu, args=(args,))
