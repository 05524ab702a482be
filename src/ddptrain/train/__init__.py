"""Training: the trainer, the step loop, evaluation, precision, optimizer and schedule, the checkpoint
format and its files, metrics, timing and the run directory's sinks."""
