"""parity_ext: run a trainer parity did not build under parity's step
protocol (`parity lockstep --external CMD`, docs/external.md).

numpy only: spec (parity's model specs and view names), npz (parity's .npz
files), data (parity's datasets and batch order).
"""
