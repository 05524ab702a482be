"""Fixtures of the hostile suite: the misbehaving loopback server (see server.py)."""

from .server import hostile_server  # noqa: F401 (a fixture)
