#!/usr/bin/env python3
"""The NumPy example (python/examples/numpy_serial.py) as a trainer that
declines intermediates in its hello, for tests/external/test_ext_check.sh:
parity then checks its step END-TO-END only."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python", "examples"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
from numpy_serial import SerialTrainer   # noqa: E402
from parity_ext import Session, serve    # noqa: E402

with Session(name="numpy-declines", intermediates=False) as s:
    serve(s, SerialTrainer(s.hello, None))
