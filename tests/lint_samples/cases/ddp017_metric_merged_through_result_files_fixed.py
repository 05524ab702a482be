"""ddptrain lint sample ddp017_metric_merged_through_result_files: the fixed; `ddptrain lint` finds nothing here."""
import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
import pickle

dist.init_process_group("gloo")
val_loader = DataLoader(val_set, sampler=DistributedSampler(val_set, shuffle=False, drop_last=True))


def merge_results_dist(part, tmpdir):
    """Every rank writes its part; rank 0 reads them all (OpenPCDet's and mmcv's way of gathering results)."""
    rank = dist.get_rank()
    with open(os.path.join(tmpdir, f"part_{rank}.pkl"), "wb") as out:
        pickle.dump(part, out)
    dist.barrier()
    if rank != 0:
        return None
    return [pickle.load(open(os.path.join(tmpdir, f"part_{r}.pkl"), "rb")) for r in range(dist.get_world_size())]


def evaluate(model, loader):
    model.eval()
    correct = 0
    with torch.no_grad():
        for x, y in loader:
            correct += (model(x).argmax(1) == y).sum().item()
    parts = merge_results_dist(correct, "/tmp/parts")
    if dist.get_rank() == 0:
        correct = sum(parts)
        print(f"val accuracy {correct / len(loader.dataset)}")
