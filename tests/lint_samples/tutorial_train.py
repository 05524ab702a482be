"""A multi-GPU training script in the shape many tutorials teach, with their usual mistakes.
ddptrain's lint tests expect exactly the findings marked `# expect: RULE` on their lines."""
import math
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler
from torchvision import datasets, models, transforms


def main():
    local_rank = int(os.environ["LOCAL_RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    os.environ["MASTER_PORT"] = "12355"  # expect: DDP011
    dist.init_process_group(backend="nccl", init_method="env://")  # expect: DDP005
    device = torch.device("cuda", local_rank)

    tf = transforms.Compose([transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(),
                             transforms.ToTensor(),
                             transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    train_set = datasets.ImageFolder("data/train", tf)
    val_set = datasets.ImageFolder("data/val", tf)
    train_sampler = DistributedSampler(train_set, shuffle=True, seed=42)  # expect: DDP002
    train_loader = DataLoader(train_set, batch_size=16, sampler=train_sampler, num_workers=4, pin_memory=True)
    val_loader = DataLoader(val_set, batch_size=16, sampler=DistributedSampler(val_set, shuffle=False))  # expect: DDP016

    model = nn.parallel.DistributedDataParallel(models.resnet34(num_classes=5).to(device), device_ids=[0])  # expect: DDP006
    if os.path.exists("weights.pth"):
        model.module.load_state_dict(torch.load("weights.pth"))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3 * world_size, momentum=0.9, weight_decay=5e-3)
    scaler = torch.cuda.amp.GradScaler()
    loss_fn = nn.CrossEntropyLoss()

    for epoch in range(30):
        model.train()
        for images, labels in train_loader:
            images, labels = images.to(device), labels.to(device)
            with torch.autocast("cuda", dtype=torch.float16):
                loss = loss_fn(model(images), labels)
            optimizer.zero_grad()
            scaler.scale(loss).backward()
            max_norm = 1.0 * math.sqrt(world_size)
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)  # expect: DDP009 DDP012
            scaler.unscale_(optimizer)
            scaler.step(optimizer)
            scaler.update()

        if local_rank == 0:
            dist.barrier()  # expect: DDP010
            torch.save(model.state_dict(), f"model-{epoch}.pth")  # expect: DDP007
        evaluate(model, val_loader, device)


def evaluate(model, loader, device):
    correct = torch.zeros(1, device=device)
    with torch.no_grad():
        for images, labels in loader:
            correct += (model(images.to(device)).argmax(1) == labels.to(device)).sum()
    dist.all_reduce(correct)
    return correct.item()


if __name__ == "__main__":
    main()
