"""ddptrain lint sample ddp017_metric_printed_through_a_helper: the fixed; `ddptrain lint` finds nothing here."""
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


def print_only_rank0(message):
    if dist.get_rank() == 0:
        print(message)


def test(loader, model):
    model.eval()
    correct = torch.zeros(1)
    with torch.no_grad():
        for x, y in loader:
            correct += (model(x).argmax(1) == y).sum()
    dist.all_reduce(correct)  # every rank's count
    print_only_rank0(f"Accuracy: {100 * correct.item() / len(loader.dataset.dataset):.1f}%")


if __name__ == "__main__":
    dist.init_process_group("gloo")
    model = DDP(model)
    # each index on one rank, no padding: the summed count is exact
    part = torch.utils.data.Subset(test_data, range(dist.get_rank(), len(test_data), dist.get_world_size()))
    test_loader = DataLoader(part)
    test(test_loader, model)
