#!/usr/bin/env python3
"""A trainer for the protocol tests: answers every step with the state it got
(loss 1.0) and every run request with its starting state, unless told to misbehave:
--lie shape|missing|nan|silent|raise|twice|extra-inter names the mistake."""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from parity_ext import Session   # noqa: E402


def answer(req, lie):
    state = dict(req.state)
    loss = 1.0
    if lie == "shape":
        state["layer0.bias"] = state["layer0.bias"][:-1]
    elif lie == "missing":
        del state["layer1.weight"]
    elif lie == "nan":
        loss = float("nan")
    elif lie == "raise":
        raise RuntimeError("the trainer's own failure")
    elif lie == "silent":
        return
    inter = {"loss.samples": np.ones(len(req.batch["labels"]), req.batch["x"].dtype)}
    if lie == "extra-inter":
        inter["layer9.out"] = inter["loss.samples"]
    req.reply(state, loss, inter, seconds=0.25)
    if lie == "twice":
        req.reply(state, loss, inter)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lie")
    o = ap.parse_args()
    with Session(name="echo", intermediates=True) as s:
        for req in s:
            if req.op == "step":
                answer(req, o.lie)
            else:
                req.records   # read and checked, as a trainer reads its batches
                for t in range(1, req.steps + 1):
                    req.log(t, 1.0, 0.0)
                    req.save(t, req.state)
                req.reply()
    return 0


if __name__ == "__main__":
    sys.exit(main())
