"""ddptrain lint sample ddp017_sampler_made_in_a_helper_and_a_metric_object: the fixed; `ddptrain lint` finds nothing here."""
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


def make_sampler(dataset, shuffle, distributed):
    if distributed:
        return DistributedSampler(dataset, shuffle=shuffle, drop_last=True)  # no padded repeats summed twice
    return None


class PixelAccuracy:
    def __init__(self):
        self.correct = self.labeled = 0

    def update(self, pred, label):  # every rank's counts summed as they come
        counts = torch.tensor([(pred.argmax(1) == label).sum().item(), label.numel()])
        dist.all_reduce(counts)
        self.correct += counts[0].item()
        self.labeled += counts[1].item()

    def get(self):
        return self.correct / max(self.labeled, 1)


class Trainer:
    def __init__(self, model, val_set):
        dist.init_process_group("gloo")
        self.model = DDP(model)
        self.val_loader = DataLoader(val_set, sampler=make_sampler(val_set, False, True))
        self.metric = PixelAccuracy()

    def validation(self):
        self.model.eval()
        for image, target in self.val_loader:
            with torch.no_grad():
                self.metric.update(self.model(image), target)
        pix_acc = self.metric.get()
        if dist.get_rank() == 0:
            print(f"validation pixAcc {pix_acc:.3f}")


if __name__ == "__main__":
    Trainer(model, val_set).validation()
