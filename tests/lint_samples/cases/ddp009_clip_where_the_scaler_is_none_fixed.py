"""ddptrain lint sample ddp009_clip_where_the_scaler_is_none: the fixed; `ddptrain lint` finds nothing here."""
import torch


def train_one_epoch(model, optimizer, loader, scaler=None, max_norm=1.0):
    for images, targets in loader:
        loss = model(images, targets)
        if scaler is not None:
            scaler.scale(loss).backward()
        else:
            loss.backward()
        if scaler is not None:
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            scaler.step(optimizer)
            scaler.update()
        else:
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)  # no scaler: the gradients are as they are
            optimizer.step()
        optimizer.zero_grad()
