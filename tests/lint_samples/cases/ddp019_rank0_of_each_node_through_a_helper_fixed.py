"""ddptrain lint sample ddp019_rank0_of_each_node_through_a_helper: the fixed; `ddptrain lint` finds nothing here."""
import os
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP


def main_process(args):
    return args.rank == 0


def main_worker(gpu, args):
    args.rank = int(os.environ["RANK"]) * args.ngpus_per_node + gpu
    dist.init_process_group("nccl", init_method=args.dist_url, world_size=args.world_size, rank=args.rank)
    torch.cuda.set_device(gpu)
    model = DDP(build_model().cuda(gpu), device_ids=[gpu])
    for epoch in range(args.epochs):
        train_one_epoch(model, epoch)
        if epoch % args.save_freq == 0 and main_process(args):
            torch.save(model.module.state_dict(), args.save_path + "/last.pth")


def main(args):
    mp.spawn(main_worker, nprocs=args.ngpus_per_node, args=(args,))


if __name__ == "__main__":
    main(parse_args())
