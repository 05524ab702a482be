"""How processes start and talk: launching, the process group, preemption, heartbeats, preflight,
failure explanations, global batch norm. Imports nothing of ddptrain's data, models or training."""
