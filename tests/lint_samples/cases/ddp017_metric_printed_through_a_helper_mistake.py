"""ddptrain lint sample ddp017_metric_printed_through_a_helper: the mistake (lines marked `# expect:` get exactly those findings)."""
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


def print_only_rank0(message):
    if dist.get_rank() == 0:
        print(message)


def test(loader, model):
    model.eval()
    correct = 0
    with torch.no_grad():
        for x, y in loader:
            correct += (model(x).argmax(1) == y).sum().item()
    correct /= len(loader.dataset)  # this rank's count over the whole set: about 1/world_size
    print_only_rank0(f"Accuracy: {100 * correct:.1f}%")  # expect: DDP017


if __name__ == "__main__":
    dist.init_process_group("gloo")
    model = DDP(model)
    test_loader = DataLoader(test_data, sampler=DistributedSampler(test_data, shuffle=False))
    test(test_loader, model)
