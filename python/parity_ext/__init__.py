"""parity_ext: run a trainer parity did not build under parity's step
protocol (`parity lockstep --external CMD`, docs/external.md).

numpy only: protocol (Session), loop (serve a trainer object), npz, data,
spec, faults. torch_helper (model_from_spec and parity state <-> torch) is
imported on its own, where PyTorch is installed.
"""
from .protocol import ProtocolError, Session, env_rank
from .loop import serve

__all__ = ["ProtocolError", "Session", "env_rank", "serve"]
