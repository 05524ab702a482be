"""ddptrain lint sample ddp019_node_rank_option_and_spawned_gpu_index: the fixed; `ddptrain lint` finds nothing here."""
import os, math
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


def main_worker(gpu, ngpus_per_node, args):
    args.gpu = gpu
    args.rank = args.rank * ngpus_per_node + gpu  # --rank counts nodes: the job runs on several
    dist.init_process_group("nccl", init_method=os.environ["DIST_URL"], world_size=args.world_size, rank=args.rank)
    torch.cuda.set_device(args.gpu)
    model = DDP(build_model().cuda(args.gpu), device_ids=[args.gpu])
    for epoch in range(10):
        train_one_epoch(model, epoch)
        if args.rank == 0:  # rank 0 of the job, not of each node
            torch.save(model.module.state_dict(), "checkpoint.pth.tar")


def main(args):
    ngpus_per_node = torch.cuda.device_count()
    args.world_size = ngpus_per_node * args.world_size
    mp.spawn(main_worker, nprocs=ngpus_per_node, args=(ngpus_per_node, args))
