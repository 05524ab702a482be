"""ddptrain lint sample ddp026_a_global_of_the_main_block_in_spawned_code: the fixed; `ddptrain lint` finds nothing here."""
import argparse
import os
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def loss_of(out, y, scale):
    return nn.functional.mse_loss(out, y) * scale


def run(rank, world_size, args):
    os.environ.setdefault("MASTER_ADDR", "localhost")
    os.environ.setdefault("MASTER_PORT", "0")
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    model = DDP(nn.Linear(2, 2))
    loss_of(model(torch.randn(4, 2)), torch.randn(4, 2), args.loss_scale).backward()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--loss-scale", type=float, default=1.0)
    args = parser.parse_args()
    mp.spawn(run, args=(2, args), nprocs=2)
