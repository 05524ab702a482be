"""ddptrain lint sample ddp009_clip_in_the_else_of_the_same_amp_switch: the fixed; `ddptrain lint` finds nothing here."""
import torch


def train_one_epoch(model, optimizer, loader, scaler, use_amp, max_norm=1.0):
    for images, targets in loader:
        with torch.autocast("cuda", enabled=use_amp):
            loss = model(images, targets)
        if use_amp:
            scaler.scale(loss).backward()
        else:
            loss.backward()
        if use_amp:
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            scaler.step(optimizer)
            scaler.update()
        else:
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)  # no scaler on this path
            optimizer.step()
        optimizer.zero_grad()
