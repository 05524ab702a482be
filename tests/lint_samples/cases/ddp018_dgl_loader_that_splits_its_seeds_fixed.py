"""ddptrain lint sample ddp018_dgl_loader_that_splits_its_seeds: the fixed; `ddptrain lint` finds nothing here."""
import torch
import torch.distributed as dist
from dgl.dataloading import DataLoader, NeighborSampler
from torch.nn.parallel import DistributedDataParallel


def run(rank, world_size, graph, train_idx):
    dist.init_process_group("nccl", world_size=world_size, rank=rank)
    torch.cuda.set_device(rank)
    model = DistributedDataParallel(build_model().cuda(rank), device_ids=[rank])
    loader = DataLoader(graph, train_idx, NeighborSampler([10, 10]), batch_size=1024, shuffle=True, use_ddp=True)
    for epoch in range(10):
        for input_nodes, output_nodes, blocks in loader:
            train_step(model, blocks)


if __name__ == "__main__":
    torch.multiprocessing.spawn(run, args=(2, load_graph(), load_idx()), nprocs=2)
