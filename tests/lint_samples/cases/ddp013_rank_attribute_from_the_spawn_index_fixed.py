"""ddptrain lint sample ddp013_rank_attribute_from_the_spawn_index: the fixed; `ddptrain lint` finds nothing here."""
import os, math
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


def main_worker(gpu, ngpus, args):
    args.rank = gpu  # one node: the spawned process's index is its rank and its GPU
    dist.init_process_group("nccl", init_method=args.dist_url, world_size=args.world_size, rank=args.rank)
    torch.cuda.set_device(args.rank)
    model = DDP(build_model().cuda(), device_ids=[gpu])


if __name__ == "__main__":
    args = parse_args()
    mp.spawn(main_worker, nprocs=torch.cuda.device_count(), args=(torch.cuda.device_count(), args))
