"""Runs a trainer object over parity's requests, so an example only writes its
training step. The trainer has three methods, called on every rank:

    load(get_state, optim_t)   start from a state; get_state() returns it
                               ({name: array}, parity's names), read from
                               parity's folder on the rank that calls it
    step(get_batch, t, want)   one step on get_batch() ({x, labels, records});
                               returns (loss, intermediates or None), both
                               needed on rank 0 only
    state()                    the full state now ({name: array}; rank 0's
                               counts)

`step` requests load parity's state each time, and the reply carries the
step call's seconds (on rank 0's clock); a `run` request loads its state
once and runs its steps on its own, on the dataset parity named in hello,
timing each step the same way.

Not the protocol itself (protocol.py); tested through the examples
(python/tests/test_examples_*.py).
"""
import time

from .data import Dataset


def serve(session, trainer):
    """Answers every request of `session` (an entered protocol.Session) with
    `trainer` until parity's quit."""
    for req in session:
        if req.op == "step":
            trainer.load(lambda: req.state, req.optim_t)
            t0 = time.perf_counter()
            loss, inter = trainer.step(lambda: req.batch, req.step, req.wants_intermediates)
            req.reply(trainer.state(), loss, inter, seconds=time.perf_counter() - t0)
        else:
            run(session, trainer, req)


def run(session, trainer, req):
    """A `run` request: req.steps steps from req.state on the records of
    req.records, the dataset opened only on the ranks that read a batch."""
    data = []

    def batch(records):
        if not data:
            h = session.hello
            data.append(Dataset(h.dataset.get("dir") or h.dataset["name"], h.dtype))
        return data[0].batch(records)

    trainer.load(lambda: req.state, 0)
    for t in range(1, req.steps + 1):
        t0 = time.perf_counter()
        loss, _ = trainer.step(lambda: batch(req.records[t - 1]), t, False)
        req.log(t, loss, time.perf_counter() - t0)
        if t in req.snapshots:
            req.save(t, trainer.state())
    req.reply()
