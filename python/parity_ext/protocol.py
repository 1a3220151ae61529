"""The trainer's side of parity's step protocol (docs/external.md): parity
drives, the trainer answers.

    with Session(name="my-trainer", rank=r, world=w, broadcast=bcast) as s:
        for req in s:                       # StepRequest or RunRequest
            if req.op == "step":
                ...load req.state, train one step on req.batch...
                req.reply(new_state, loss, intermediates)

parity makes a private folder (PARITY_EXTERNAL) with two FIFOs; rank 0 opens
`to-trainer` for reading, then `from-trainer` for writing, and reads one JSON
object per line. Every request is passed to every rank by `broadcast` (a
callable: rank 0 calls it with the message and every rank gets it back, e.g.
mpi4py's comm.bcast or torch_helper.broadcaster()), so all ranks iterate
together; only rank 0 touches the FIFOs and writes files (NAME.part, then
renamed). An exception inside the `with` block is sent to parity as an
`error` message (its text) before it propagates.

Not a trainer: no arithmetic here (loop.py runs a trainer object over the
requests). Tested against a Python stand-in for parity
(python/tests/test_protocol.py, python/tests/fake_parity.py).
"""
import json
import math
import os

import numpy as np

from . import npz, spec

PROTOCOL = 1
ENV_DIR = "PARITY_EXTERNAL"
RANK_VARS = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID")
TO_TRAINER, FROM_TRAINER = "to-trainer", "from-trainer"
ABORT = "abort"   # rank 0 to the other ranks only: stop, rank 0 has failed


class ProtocolError(Exception):
    """The conversation with parity broke its rules (either side); the message
    says which step, file or field."""


def env_rank():
    """This process's rank from the launcher's environment (torchrun's RANK,
    Open MPI's OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK, Slurm's SLURM_PROCID);
    0 when all are unset or 0."""
    for var in RANK_VARS:
        v = os.environ.get(var, "")
        if v not in ("", "0"):
            return int(v)
    return 0


class Hello:
    """parity's hello: the run's settings. `model` is the parsed spec
    (spec.Model), `dtype` 'f32'/'f64', `optim` {name, lr, momentum, beta1,
    beta2, eps}, `dataset` {name, dir, n_train, n_val, shape, classes}."""

    def __init__(self, msg, folder):
        self.msg, self.folder = msg, folder
        try:
            self.spec, self.act, self.dtype = msg["model"], msg.get("act", "relu"), msg["dtype"]
            self.batch, self.chunk = int(msg["batch"]), int(msg.get("chunk", 0))
            self.optim, self.dataset = dict(msg["optim"]), dict(msg.get("dataset") or {})
            self.seed = msg.get("seed")
            self.intermediates = bool(msg.get("intermediates", False))
        except (KeyError, TypeError, ValueError) as e:
            raise ProtocolError(f"hello: field {e} missing or malformed") from e
        if self.dtype not in npz.DTYPES:
            raise ProtocolError(f"hello: dtype '{self.dtype}': expected f32 or f64")
        if self.optim.get("name") not in spec.OPTIM_STATES:
            raise ProtocolError(f"hello: optim name {self.optim.get('name')!r}: expected one of "
                                f"{', '.join(spec.OPTIM_STATES)}")
        try:
            self.model = spec.parse(self.spec, self.act)
        except spec.SpecError as e:
            raise ProtocolError(f"hello: {e}") from e

    def state_layout(self):
        """{name: (shape, dtype)} of the state files of this run."""
        return npz.expected_state(self.model, self.dtype, self.optim["name"])


class Request:
    """One request from parity; `op` is 'step' or 'run'. Files are loaded on
    the ranks that ask for them (all ranks share parity's folder: one host)."""

    def __init__(self, session, msg):
        self.session, self.msg, self.op = session, msg, msg["op"]
        self.replied = False

    def path(self, field):
        """The file named by the message's field, inside parity's folder."""
        name = self.msg.get(field)
        if not isinstance(name, str) or not name:
            raise ProtocolError(f"{self.op}: field '{field}' missing")
        return os.path.join(self.session.folder, name)

    def load_state(self, field, where, fill_optimizer=False):
        """The state .npz of `field`, checked against the run's layout; with
        fill_optimizer, missing opt.* arrays are zeros (a fresh optimizer)."""
        path, layout = self.path(field), self.session.hello.state_layout()
        arrays = npz.load(path)
        if fill_optimizer:
            for n, (shape, dt) in layout.items():
                arrays.setdefault(n, np.zeros(shape, dt))
        self.check(arrays, layout, f"{where}: {path}")
        return arrays

    @staticmethod
    def check(arrays, layout, where, exact=True):
        """npz.check, its failure a ProtocolError."""
        try:
            npz.check(arrays, layout, where, exact)
        except npz.NpzError as e:
            raise ProtocolError(str(e)) from e

    def _send(self, reply):
        if self.replied:
            raise ProtocolError(f"{self.op}: answered twice")
        self.replied = True
        self.session.send(reply)


class StepRequest(Request):
    """`step`: one training step from `state` on `batch`. Fields: step (1-based),
    optim_t (optimizer updates done before it), wants_intermediates."""

    def __init__(self, session, msg):
        super().__init__(session, msg)
        try:
            self.step, self.optim_t = int(msg["step"]), int(msg.get("optim_t", 0))
        except (KeyError, TypeError, ValueError) as e:
            raise ProtocolError(f"step: field {e} missing or malformed") from e
        self.wants_intermediates = msg.get("intermediates") is not None
        self._state = self._batch = None

    @property
    def state(self):
        """{name: array}: weights and optimizer state before the step, parity's names."""
        if self._state is None:
            self._state = self.load_state("state", f"step {self.step}")
        return self._state

    @property
    def batch(self):
        """{'x': (B, features) dtype, 'labels': (B,) int32, 'records': (B,) int64}."""
        if self._batch is None:
            path = self.path("batch")
            b = npz.load(path)
            feats = self.session.hello.model.n_inputs
            B = len(b.get("labels", ()))
            self.check(b, {"x": ((B, feats), npz.dtype_of(self.session.hello.dtype)),
                           "labels": ((B,), np.int32), "records": ((B,), np.int64)},
                       f"step {self.step}: {path}")
            self._batch = b
        return self._batch

    def reply(self, state, loss, intermediates=None, check=True, seconds=None):
        """Rank 0: writes `state` (the full state after the step) to `out` and,
        when parity asked, `intermediates`; sends the loss (the batch's mean
        cross-entropy before the update) and, when given, `seconds`, the step's
        own training time (writing these files left out).
        Other ranks: nothing. check=False skips the name/shape/dtype checks (for
        tests of parity's own checks)."""
        if self.session.rank != 0:
            return
        hello, where = self.session.hello, f"step {self.step}"
        loss = float(loss)
        if not math.isfinite(loss):
            raise ProtocolError(f"{where}: the loss is {loss}, not a finite number")
        if check:
            self.check(state, hello.state_layout(), f"{where}: state")
        out = self.path("out")
        npz.save(out, state)
        if self.wants_intermediates:
            if intermediates is None and self.session.intermediates:
                raise ProtocolError(f"{where}: parity asked for intermediates and this trainer "
                                    "said it sends them, but reply() got none")
            if intermediates is not None:
                if check:
                    B = len(self.batch["labels"])
                    layout = npz.expected_intermediates(hello.model, hello.dtype, B)
                    layout = {n: layout[n] for n in intermediates if n in layout}
                    self.check(intermediates, layout, f"{where}: intermediates", exact=False)
                    extra = [n for n in intermediates if n not in layout]
                    if extra:
                        raise ProtocolError(f"{where}: intermediates: '{extra[0]}' is no "
                                            "intermediate of this model")
                npz.save(self.path("intermediates"), intermediates)
        msg = {"op": "step", "step": self.step, "loss": loss}
        if seconds is not None:
            msg["seconds"] = float(seconds)
        self._send(msg)


class RunRequest(Request):
    """`run`: `steps` steps on the trainer's own from `state`, step t on the
    records of row t of `batches`. log(t, loss, seconds) after each step,
    save(t, state) after the steps named in `snapshots`, then reply()."""

    def __init__(self, session, msg):
        super().__init__(session, msg)
        try:
            self.steps = int(msg["steps"])
            snaps = msg.get("snapshots") or []
            self.snapshots = {int(s["step"]): str(s["path"]) for s in snaps}
        except (KeyError, TypeError, ValueError) as e:
            raise ProtocolError(f"run: field {e} missing or malformed") from e
        if self.steps < 1:
            raise ProtocolError(f"run: steps {self.steps}: expected at least 1")
        bad = [t for t in self.snapshots if not 1 <= t <= self.steps]
        if bad:
            raise ProtocolError(f"run: a snapshot of step {bad[0]}, outside 1..{self.steps}")
        self._state = self._records = None
        self._log, self._logged, self._saved = None, 0, set()

    @property
    def state(self):
        """The full starting state (opt.* arrays not in the file are zeros)."""
        if self._state is None:
            self._state = self.load_state("state", "run", fill_optimizer=True)
        return self._state

    @property
    def records(self):
        """The records of each step: a list of `steps` int64 arrays."""
        if self._records is None:
            from .data import DataError, order_rows
            path = self.path("batches")
            try:
                rows = order_rows(npz.load(path).get("records"))
            except (OSError, ValueError, DataError) as e:
                raise ProtocolError(f"run: {path}: {e}") from e
            if len(rows) != self.steps:
                raise ProtocolError(f"run: {path}: {len(rows)} rows for {self.steps} steps")
            self._records = rows
        return self._records

    def log(self, step, loss, seconds):
        """Rank 0: the log line of step `step` (1-based, in order)."""
        if self.session.rank != 0:
            return
        if step != self._logged + 1:
            raise ProtocolError(f"run: log of step {step} after step {self._logged}")
        loss = float(loss)
        if not math.isfinite(loss):
            raise ProtocolError(f"run: step {step}: the loss is {loss}, not a finite number")
        if self._log is None:
            self._log = open(self.path("log") + ".part", "w", encoding="utf-8")
        self._log.write(json.dumps({"step": step, "loss": loss, "seconds": float(seconds)})
                        + "\n")
        self._logged = step

    def save(self, step, state):
        """Rank 0: the state after step `step` when parity asked for it (else nothing)."""
        if self.session.rank != 0 or step not in self.snapshots:
            return
        self.check(state, self.session.hello.state_layout(), f"run: step {step}: state")
        npz.save(os.path.join(self.session.folder, self.snapshots[step]), state)
        self._saved.add(step)

    def reply(self):
        """Rank 0: closes the log (renamed from .part) and tells parity it is done."""
        if self.session.rank != 0:
            return
        if self._logged != self.steps:
            raise ProtocolError(f"run: {self._logged} steps logged of {self.steps}")
        missing = sorted(s for s in self.snapshots if s not in self._saved)
        if missing:
            raise ProtocolError(f"run: the weights after step {missing[0]} were not saved")
        if self._log is None:
            self._log = open(self.path("log") + ".part", "w", encoding="utf-8")
        self._log.close()
        os.replace(self.path("log") + ".part", self.path("log"))
        self._send({"op": "run", "steps": self.steps})


REQUESTS = {"step": StepRequest, "run": RunRequest}


class Session:
    """One conversation with parity; see the module docstring.

    name: the trainer's name for parity's messages. rank, world: this process
    (rank defaults to env_rank()). broadcast: callable(obj) -> obj, rank 0's
    obj on every rank; needed when world > 1. intermediates: this trainer
    sends the step's intermediates when parity asks. folder: parity's folder
    (default $PARITY_EXTERNAL; rank 0 only, the others get it from rank 0)."""

    def __init__(self, name, rank=None, world=1, broadcast=None, intermediates=False,
                 folder=None):
        self.name, self.world, self.intermediates = name, int(world), bool(intermediates)
        self.rank = env_rank() if rank is None else int(rank)
        if self.world > 1 and broadcast is None:
            raise ValueError("Session: world > 1 needs a broadcast function")
        self.broadcast = broadcast or (lambda obj: obj)
        self.folder = folder
        self.hello = None
        self._rd = self._wr = None

    # -- rank 0's pipe
    def _open(self):
        if self.folder is None:
            self.folder = os.environ.get(ENV_DIR)
        if not self.folder:
            raise ProtocolError(f"{ENV_DIR} is not set: run this trainer under parity "
                                "(parity lockstep --external 'CMD')")
        # Open order is part of the protocol: parity opens them the same way.
        self._rd = open(os.path.join(self.folder, TO_TRAINER), "r", encoding="utf-8")
        self._wr = open(os.path.join(self.folder, FROM_TRAINER), "w", encoding="utf-8")

    def _read(self):
        line = self._rd.readline()
        if not line:
            raise ProtocolError("parity closed the pipe without 'quit'")
        try:
            msg = json.loads(line)
        except json.JSONDecodeError as e:
            raise ProtocolError(f"parity sent a line that is not JSON: {line.strip()[:80]!r}") \
                from e
        if not isinstance(msg, dict) or msg.get("op") not in ("hello", "quit", *REQUESTS):
            raise ProtocolError(f"parity sent an unknown message: {line.strip()[:80]!r}")
        return msg

    def send(self, msg):
        """Rank 0: one message to parity (a JSON line, flushed)."""
        self._wr.write(json.dumps(msg, allow_nan=False) + "\n")
        self._wr.flush()

    def _next(self, check):
        """The next message from parity, on every rank. Rank 0 reads it and
        passes on check(msg), which may raise ProtocolError: then every rank
        stops, not only rank 0."""
        if self.rank == 0:
            try:
                msg = check(self._read())
            except ProtocolError as e:
                self.broadcast({"op": ABORT, "message": str(e)})
                raise
            return self.broadcast(msg)
        msg = self.broadcast(None)
        if msg["op"] == ABORT:
            raise ProtocolError(f"rank 0: {msg['message']}")
        return msg

    # -- the conversation
    def __enter__(self):
        if self.rank == 0:
            try:
                self._open()
            except (ProtocolError, OSError) as e:
                self.broadcast({"op": ABORT, "message": str(e)})
                raise
        try:
            msg = self._next(self._check_hello)
            self.folder = msg["folder"]
            self.hello = Hello(msg["hello"], self.folder)
        except BaseException as e:   # __exit__ is not called when __enter__ fails
            self.__exit__(type(e), e, e.__traceback__)
            raise
        if self.rank == 0:
            self.send({"op": "hello", "protocol": PROTOCOL, "name": self.name,
                       "world": self.world, "intermediates": self.intermediates})
        return self

    def _check_hello(self, msg):
        """Rank 0: msg must be a hello of this protocol with usable settings;
        the other ranks get it with parity's folder."""
        if msg["op"] != "hello":
            raise ProtocolError(f"expected hello first, parity sent '{msg['op']}'")
        if msg.get("protocol") != PROTOCOL:
            raise ProtocolError(f"hello: protocol {msg.get('protocol')!r}, this client speaks "
                                f"{PROTOCOL}")
        Hello(msg, self.folder)
        return {"op": "hello", "hello": msg, "folder": self.folder}

    def __iter__(self):
        """The requests until parity's quit."""
        while True:
            msg = self._next(self._check_request)
            if msg["op"] == "quit":
                return
            req = REQUESTS[msg["op"]](self, msg)
            yield req
            if self.rank == 0 and not req.replied:
                raise ProtocolError(f"{req.op}: the trainer did not answer")

    def _check_request(self, msg):
        """Rank 0: msg must be quit or a well-formed request."""
        if msg["op"] == "hello":
            raise ProtocolError("parity sent hello twice")
        if msg["op"] != "quit":
            REQUESTS[msg["op"]](self, msg)
        return msg

    def __exit__(self, exc_type, exc, tb):
        if exc is not None and self.rank == 0 and self._wr is not None:
            text = str(exc) or exc_type.__name__
            if not isinstance(exc, (ProtocolError, npz.NpzError)):
                text = f"{exc_type.__name__}: {text}"
            try:
                self.send({"op": "error", "message": " ".join(text.split())[:1000]})
            except (OSError, ValueError):
                pass   # parity is gone: nobody to tell
        for f in (self._wr, self._rd):
            if f is not None:
                try:
                    f.close()
                except OSError:
                    pass
        self._rd = self._wr = None
        return False
