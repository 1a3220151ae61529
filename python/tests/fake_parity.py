"""parity's side of the step protocol, in Python, for the tests of the
client and the examples while `parity lockstep --external` is not there:
the private folder with its two FIFOs, the trainer started in its own
process group with PARITY_EXTERNAL set and its output in trainer.log, JSON
lines both ways, files written as NAME.part and renamed.

Also `reference_run`: parity's reference trainer's states, batches and
losses, step by step, for comparing a trainer's answers against.
Not a verifier: the bound is parity's (the C side); tests here compare to a
tolerance.
"""
import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
import threading
import unittest
import time

import numpy as np

from parity_ext import data, npz

TIMEOUT = 120


class TrainerDied(Exception):
    """The trainer exited or hung; the message holds its log's last lines."""


class FakeParity:
    """with FakeParity(cmd) as p: p.hello(...); p.step(...); p.quit()"""

    def __init__(self, cmd, env=None, timeout=TIMEOUT):
        self.cmd, self.timeout = cmd, timeout
        self.env = dict(os.environ if env is None else env)
        self.dir = self.proc = self.wfd = self.rfd = None
        self.buf = b""

    def __enter__(self):
        self.dir = tempfile.mkdtemp(prefix="fake_parity.")
        os.chmod(self.dir, 0o700)
        for f in ("to-trainer", "from-trainer"):
            os.mkfifo(os.path.join(self.dir, f), 0o600)
        self.env.update(PARITY_EXTERNAL=self.dir, PARITY_PROTOCOL="1")
        try:
            with open(self.file("trainer.log"), "wb") as log:
                self.proc = subprocess.Popen(self.cmd, env=self.env, stdin=subprocess.DEVNULL,
                                             stdout=log, stderr=subprocess.STDOUT,
                                             start_new_session=True)
            self.wfd = self.open_fifo("to-trainer", os.O_WRONLY)
            self.rfd = self.open_fifo("from-trainer", os.O_RDONLY)
        except BaseException:
            self.__exit__(None, None, None)   # __exit__ is not called when __enter__ fails
            raise
        return self

    def __exit__(self, *exc):
        for fd in (self.wfd, self.rfd):
            if fd is not None:
                os.close(fd)
        if self.proc and self.proc.poll() is None:
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)
        return False

    def file(self, name):
        return os.path.join(self.dir, name)

    def log(self):
        with open(self.file("trainer.log"), errors="replace") as f:
            return f.read()

    def died(self, what):
        rc = self.proc.poll()
        tail = "\n".join(self.log().splitlines()[-15:])
        return TrainerDied(f"{what}: trainer {'exited ' + str(rc) if rc is not None else 'hung'}"
                           f"\n{tail}")

    def open_fifo(self, name, flags):
        """Opens one FIFO (blocking until the trainer opens the other end), or
        TrainerDied when the trainer exits or the time runs out first."""
        box, path = {}, self.file(name)
        t = threading.Thread(target=lambda: box.setdefault("fd", os.open(path, flags)),
                             daemon=True)
        t.start()
        deadline = time.monotonic() + self.timeout
        while t.is_alive():
            t.join(0.05)
            if t.is_alive() and (self.proc.poll() is not None or time.monotonic() > deadline):
                other = os.open(path, (os.O_RDONLY if flags == os.O_WRONLY else os.O_WRONLY)
                                | os.O_NONBLOCK)   # releases the thread's open
                t.join()
                os.close(other)
                os.close(box["fd"])
                raise self.died(f"opening {name}")
        return box["fd"]

    def send(self, msg):
        os.write(self.wfd, (json.dumps(msg) + "\n").encode())

    def send_raw(self, text):
        os.write(self.wfd, text.encode())

    def recv(self):
        """The trainer's next message (a dict)."""
        deadline = time.monotonic() + self.timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.rfd], [], [], max(0.0, min(0.2, left)))
            if ready:
                chunk = os.read(self.rfd, 65536)
                if not chunk:
                    raise self.died("reading from-trainer")
                self.buf += chunk
            elif left <= 0:
                raise self.died(f"no answer in {self.timeout} s")
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    # -- the conversation
    def hello(self, model, dtype="f64", act="relu", batch=16, optim=None, dataset="mnist",
              seed=1, intermediates=False):
        """Sends hello; returns the trainer's answer."""
        ds = data.dataset_dir(dataset)[0] if "/" not in dataset else dataset
        self.send({"op": "hello", "protocol": 1, "model": model, "act": act, "dtype": dtype,
                   "batch": batch, "chunk": 8, "optim": optim or sgd(0.05),
                   "dataset": {"name": dataset, "dir": ds}, "seed": seed,
                   "intermediates": intermediates})
        return self.recv()

    def step(self, t, state, batch, optim_t=None, intermediates=False):
        """One step request; (answer, out arrays or None, intermediates or None)."""
        npz.save(self.file("state.npz"), state)
        npz.save(self.file("batch.npz"), batch)
        for f in ("out.npz", "inter.npz"):
            if os.path.exists(self.file(f)):
                os.unlink(self.file(f))
        self.send({"op": "step", "step": t, "state": "state.npz",
                   "optim_t": t - 1 if optim_t is None else optim_t, "batch": "batch.npz",
                   "out": "out.npz", "intermediates": "inter.npz" if intermediates else None})
        ans = self.recv()
        out = npz.load(self.file("out.npz")) if ans.get("op") == "step" else None
        inter = (npz.load(self.file("inter.npz")) if ans.get("op") == "step" and intermediates
                 and os.path.exists(self.file("inter.npz")) else None)
        return ans, out, inter

    def run(self, init, records, snapshots=()):
        """One run request; (answer, log lines, {step: saved arrays})."""
        npz.save(self.file("init.npz"), init)
        npz.save(self.file("batches.npz"), {"records": np.asarray(records, dtype=np.int64)})
        self.send({"op": "run", "steps": len(records), "state": "init.npz",
                   "batches": "batches.npz", "log": "log.jsonl",
                   "snapshots": [{"step": s, "path": f"w-{s:06d}.npz"} for s in snapshots]})
        ans = self.recv()
        if ans.get("op") != "run":
            return ans, None, None
        with open(self.file("log.jsonl")) as f:
            lines = [json.loads(s) for s in f]
        return ans, lines, {s: npz.load(self.file(f"w-{s:06d}.npz")) for s in snapshots}

    def quit(self):
        """Sends quit; the trainer's exit status."""
        self.send({"op": "quit"})
        try:
            return self.proc.wait(self.timeout)
        except subprocess.TimeoutExpired:
            raise self.died("after quit") from None

    def leftovers(self):
        """Files in the folder ending in .part (a writer that did not rename)."""
        return [f for f in os.listdir(self.dir) if f.endswith(".part")]


def sgd(lr):
    return {"name": "sgd", "lr": lr, "momentum": 0.9, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8}


def optim(name, lr):
    return dict(sgd(lr), name=name)


def reference_run(parity, tmp, model, dtype="f64", act="relu", opt=None, batch=16, steps=3,
                  seed=1, dataset="mnist"):
    """parity's reference trainer for `steps` steps: (states, batches, losses)
    with states[t] the full state after t steps (states[0] the initial one,
    optimizer state zero), batches[t-1] and losses[t-1] those of step t."""
    opt = opt or sgd(0.05)
    ck, init, log = (os.path.join(tmp, f) for f in ("ck", "init.npz", "log.jsonl"))
    cmd = [parity, "train", "--trainer", "reference", "--dtype", dtype, "--dataset", dataset,
           "--model", model, "--act", act, "--optim", opt["name"], "--lr", repr(opt["lr"]),
           "--batch", str(batch), "--steps", str(steps), "--seed", str(seed),
           "--init-save", init, "--log", log, "--checkpoint-dir", ck, "--checkpoint-every", "1",
           "--keep", str(steps + 1), "--no-digest", "--quiet"]
    if opt["name"] in ("momentum", "nesterov"):
        cmd += ["--momentum", repr(opt["momentum"])]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"parity train: exit {r.returncode}: {r.stderr.strip()}")
    layout = dict(npz.load(init))
    states = [layout]
    for t in range(1, steps + 1):
        states.append(npz.load(os.path.join(ck, f"ckpt-{t:010d}.npz")))
    names = [n for n in states[1] if n not in layout]   # optimizer state
    states[0] = {**layout, **{n: np.zeros_like(states[1][n]) for n in names}}
    ds = data.Dataset(dataset, dtype)
    batches = [ds.batch(r) for _, r in data.batches(parity, dataset, seed, batch, steps,
                                                     ds.n_train)]
    with open(log) as f:
        losses = [s["loss"] for s in map(json.loads, f) if s.get("type") == "step"]
    return states, batches, losses


def worst(a, b, skip=()):
    """(max over arrays of max |a - b| / max |b| (absolute where b is all
    zero or the name is in skip), that array's name)."""
    out = (0.0, "")
    for k in b:
        d = float(np.max(np.abs(np.asarray(a[k], np.float64) - b[k]))) if b[k].size else 0.0
        s = float(np.max(np.abs(b[k]))) if b[k].size else 0.0
        out = max(out, (d / s if s and k not in skip else d, k))
    return out


def lockstep(cmd, ref, steps, env=None, intermediates=False, **hello):
    """Drives the trainer `cmd` through `steps` steps, each from the state of
    parity's reference run `ref` (reference_run's states, batches, losses),
    and quits. [(answer, out, intermediates)] per step; AssertionError if the
    trainer fails, exits non-zero or leaves a .part file."""
    states, batches, _ = ref
    got = []
    with FakeParity(cmd, env) as p:
        ans = p.hello(intermediates=intermediates, batch=len(batches[0]["labels"]), **hello)
        if ans.get("op") != "hello":
            raise AssertionError(f"hello: {ans}\n{p.log()[-3000:]}")
        for t in range(1, steps + 1):
            ans, out, inter = p.step(t, states[t - 1], batches[t - 1],
                                     intermediates=intermediates)
            if ans.get("op") != "step" or ans.get("step") != t:
                raise AssertionError(f"step {t}: {ans}\n{p.log()[-3000:]}")
            got.append((ans, out, inter))
        rc = p.quit()
        if rc != 0 or p.leftovers():
            raise AssertionError(f"exit {rc}, left {p.leftovers()}\n{p.log()[-3000:]}")
    return got


def step_errors(got, ref, skip=()):
    """[(loss error, weight error, worst array)] per step of lockstep's answers
    against the reference: |loss - ref| / |ref|, and worst() of the state."""
    states, _, losses = ref
    return [(abs(ans["loss"] - losses[t]) / abs(losses[t]), *worst(out, states[t + 1], skip))
            for t, (ans, out, _) in enumerate(got)]


def feeds_bn_names(model):
    """The arrays whose exact gradient is 0 (a bias feeding a batchnorm) with
    their optimizer state: rounding noise on both sides, compared absolutely."""
    return {f"{pre}layer{l}.bias" for l in model.feeds_bn()
            for pre in ("", "opt.velocity.", "opt.m.", "opt.v.")}


class ReferenceCase(unittest.TestCase):
    """A test case with parity's reference runs made once per class:
    self.ref(model, ...) as reference_run's, in a folder removed at the end;
    self.steps(cmd, model, ...) runs lockstep against it."""
    BATCH, STEPS, PARITY = 17, 3, None

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.refs = {}

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def ref(self, model, act="relu", opt=None, dtype="f64"):
        opt = opt or sgd(0.1)
        key = (model, act, json.dumps(opt, sort_keys=True), dtype)
        if key not in self.refs:
            d = tempfile.mkdtemp(dir=self.tmp.name)
            self.refs[key] = reference_run(self.PARITY, d, model, dtype=dtype, act=act, opt=opt,
                                           batch=self.BATCH, steps=self.STEPS)
        return self.refs[key]

    def steps(self, cmd, model, act="relu", opt=None, dtype="f64", env=None,
              intermediates=False):
        return lockstep(cmd, self.ref(model, act, opt, dtype), self.STEPS, env=env,
                        intermediates=intermediates, model=model, act=act, dtype=dtype,
                        optim=opt or sgd(0.1))

    def errors(self, got, model, act="relu", opt=None, dtype="f64", skip=()):
        """The worst loss and weight errors over the steps of `got`."""
        errs = step_errors(got, self.ref(model, act, opt, dtype), skip)
        return max(e[0] for e in errs), max(e[1:] for e in errs)
