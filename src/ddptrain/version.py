"""ddptrain's version, importable from anywhere without importing anything else."""

__version__ = "0.1.0"
