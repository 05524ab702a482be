"""ddptrain lint sample ddp010_gpu_copies_inside_one_process_are_no_collective: the mistake (lines marked `# expect:` get exactly those findings)."""
import os
import torch
import torch.cuda.comm as comm
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def sync_statistics(mean, rank, devices):
    if rank == 0:
        dist.all_reduce(mean)  # expect: DDP010
    return mean


def main():
    dist.init_process_group("nccl")
    rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(rank)
    model = DDP(build_model().cuda(), device_ids=[rank])
    for epoch in range(10):
        train_one_epoch(model, epoch)
        sync_statistics(model.module.running_mean(), rank, [rank])


if __name__ == "__main__":
    main()
