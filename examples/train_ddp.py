"""examples/train_single.py converted to DistributedDataParallel with ddptrain's library API: the
lines marked `# ddptrain`, the print indented under `is_main()` and one import dropped are the only
changes (`diff examples/train_single.py examples/train_ddp.py`).

    torchrun --nproc-per-node 2 examples/train_ddp.py --data DIR   # or: python examples/train_ddp.py ...

What the changed lines take care of: each process joins the job and gets its own device; the model
moves there and is wrapped in DDP (identical start, gradients averaged); each rank trains on its own
shard, reshuffled every epoch; every validation image is counted exactly once, summed over ranks;
only rank 0 prints and writes the (unwrapped) weights.
"""

import argparse

import torch
import ddptrain  # ddptrain
from torch import nn
from torchvision import datasets, models, transforms


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--data", required=True, help="a folder holding train/ and val/, one sub-folder per class in each"
    )
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--img-size", type=int, default=224)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", default="model.pt")
    args = parser.parse_args()

    device = ddptrain.setup()  # ddptrain
    transform = transforms.Compose(
        [
            transforms.Resize((args.img_size, args.img_size)),
            transforms.ToTensor(),
            transforms.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
        ]
    )
    train_set = datasets.ImageFolder(f"{args.data}/train", transform)
    val_set = datasets.ImageFolder(f"{args.data}/val", transform)
    train_loader = ddptrain.train_loader(train_set, batch_size=args.batch_size, num_workers=args.workers)  # ddptrain
    val_loader = ddptrain.eval_loader(val_set, batch_size=args.batch_size, num_workers=args.workers)  # ddptrain

    model = ddptrain.prepare_model(models.resnet18(weights=None, num_classes=len(train_set.classes)))  # ddptrain
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    for epoch in range(args.epochs):
        model.train()
        for images, labels in train_loader:
            images, labels = images.to(device), labels.to(device)
            optimizer.zero_grad()
            loss = loss_fn(model(images), labels)
            loss.backward()
            optimizer.step()

        model.eval()
        correct, total = 0, 0
        with torch.no_grad():
            for images, labels in val_loader:
                images, labels = images.to(device), labels.to(device)
                correct += (model(images).argmax(dim=1) == labels).sum().item()
                total += labels.numel()
        correct, total = ddptrain.reduce_sum(correct, total)  # ddptrain
        if ddptrain.is_main():  # ddptrain
            print(f"epoch {epoch + 1}: loss {loss.item():.4f}  val accuracy {correct / total:.3f} ({correct}/{total})")

    ddptrain.save_checkpoint(args.out, model)  # ddptrain


if __name__ == "__main__":
    main()
