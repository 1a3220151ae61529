"""parity_ext.protocol against a Python stand-in for parity (fake_parity.py):
the handshake, step and run requests, quit, every way a trainer or parity
can break the rules (each a one-line error sent to parity, a nonzero exit,
no .part file left), and world > 1 with rank 0 alone on the FIFOs."""
import json
import os
import subprocess
import tempfile
import threading
import unittest

import numpy as np

from util import PYTHON, PYTHON_DIR
from fake_parity import FakeParity, sgd
from parity_ext import Session, npz, spec
from parity_ext.protocol import ProtocolError

HERE = os.path.dirname(os.path.abspath(__file__))
ECHO = [PYTHON, os.path.join(HERE, "echo_trainer.py")]
MODEL = "mlp:6-4-3"


def state(dtype=np.float64, optim="sgd"):
    rng = np.random.default_rng(1)
    return {n: rng.standard_normal(s).astype(dtype)
            for n, s in spec.state_names(spec.parse(MODEL), optim)}


def batch(B=5, dtype=np.float64):
    return {"x": np.linspace(0, 1, B * 6).reshape(B, 6).astype(dtype),
            "labels": np.arange(B, dtype=np.int32) % 3, "records": np.arange(B, dtype=np.int64)}


class Conversation(unittest.TestCase):
    def test_hello_step_run_quit(self):
        with FakeParity(ECHO) as p:
            self.assertEqual(p.hello(MODEL), {"op": "hello", "protocol": 1, "name": "echo",
                                              "world": 1, "intermediates": True})
            s = state()
            ans, out, inter = p.step(4, s, batch(), intermediates=True)
            self.assertEqual(ans, {"op": "step", "step": 4, "loss": 1.0, "seconds": 0.25})
            self.assertEqual(list(out), list(s))
            self.assertTrue(all(out[k].tobytes() == s[k].tobytes() for k in s))
            self.assertEqual(list(inter), ["loss.samples"])
            ans, log, saved = p.run({k: v for k, v in s.items()}, np.zeros((3, 2)), [2])
            self.assertEqual(ans, {"op": "run", "steps": 3})
            self.assertEqual(log, [{"step": t, "loss": 1.0, "seconds": 0.0} for t in (1, 2, 3)])
            self.assertEqual(list(saved), [2])
            self.assertEqual(p.quit(), 0)
            self.assertEqual(p.leftovers(), [])

    def test_run_state_without_optimizer_state(self):
        s = state(optim="momentum")
        weights = {k: v for k, v in s.items() if not k.startswith("opt.")}
        with FakeParity(ECHO) as p:
            p.hello(MODEL, optim=dict(sgd(0.1), name="momentum"))
            ans, _, saved = p.run(weights, np.zeros((1, 2)), [1])
            self.assertEqual(ans["op"], "run")
            self.assertEqual(list(saved[1]), list(s))   # opt.velocity.* filled in, as zeros
            self.assertEqual(float(np.abs(saved[1]["opt.velocity.layer0.weight"]).max()), 0.0)
            self.assertEqual(p.quit(), 0)


class Errors(unittest.TestCase):
    """Each case: (trainer args, what parity sends, the error's text)."""

    def expect_error(self, args, drive, text, dtype="f64"):
        with FakeParity(ECHO + args) as p:
            ans = p.hello(MODEL, dtype=dtype)
            if ans.get("op") == "hello":
                ans = drive(p)
            self.assertEqual(ans["op"], "error", ans)
            self.assertRegex(ans["message"], text)
            self.assertNotIn("\n", ans["message"])
            self.assertNotEqual(p.proc.wait(30), 0)
            self.assertEqual(p.leftovers(), [])

    def step(self, p, s=None, b=None, intermediates=True):
        return p.step(1, state() if s is None else s, batch() if b is None else b,
                      intermediates=intermediates)[0]

    def test_trainer_lies(self):
        cases = [("shape", r"step 1: state: array 'layer0.bias' has shape \(3,\), expected \(4,\)"),
                 ("missing", "step 1: state: array 'layer1.weight' missing"),
                 ("nan", "step 1: the loss is nan, not a finite number"),
                 ("raise", "RuntimeError: the trainer's own failure"),
                 ("silent", "step: the trainer did not answer"),
                 ("twice", "step: answered twice"),
                 ("extra-inter", "'layer9.out' is no intermediate of this model")]
        for lie, text in cases:
            with self.subTest(lie):
                # "twice": the first answer goes out, the error after it.
                drive = (lambda p: (self.step(p), p.recv())[1]) if lie == "twice" else self.step
                self.expect_error(["--lie", lie], drive, text)

    def test_parity_sends_bad_files(self):
        s = state()
        del s["layer0.bias"]
        b = batch()
        b["labels"] = b["labels"].astype(np.int64)
        cases = [(lambda p: self.step(p, s=s), r"step 1: .*state.npz: array 'layer0.bias' missing"),
                 (lambda p: self.step(p, b=b), r"batch.npz: array 'labels' has dtype <i8"),
                 (lambda p: self.step(p, s=state(np.float32)), "has dtype <f4, expected <f8")]
        for drive, text in cases:
            with self.subTest(text):
                self.expect_error([], drive, text)

    def test_bad_run_requests(self):
        def run(steps, records, snapshots=()):
            def drive(p):
                npz.save(p.file("s.npz"), state())
                npz.save(p.file("b.npz"), {"records": np.asarray(records, np.int64)})
                p.send({"op": "run", "steps": steps, "state": "s.npz", "batches": "b.npz",
                        "log": "log.jsonl", "snapshots": list(snapshots)})
                return p.recv()
            return drive
        cases = [(run(2, [[0, 1]] * 3), r"run: .*b.npz: 3 rows for 2 steps"),
                 (run(2, [0, 1]), r"run: .*b.npz: order: expected an integer array"),
                 (run(2, [[0, 1]] * 2, [{"step": 3, "path": "w.npz"}]),
                  r"run: a snapshot of step 3, outside 1..2"),
                 (run(0, []), "run: steps 0: expected at least 1")]
        for drive, text in cases:
            with self.subTest(text):
                self.expect_error([], drive, text)

    def test_bad_messages(self):
        def send(line):
            def drive(p):
                p.send_raw(line)
                return p.recv()
            return drive
        cases = [('{"op": "dance"}\n', "unknown message"), ("step 1\n", "not JSON"),
                 ('{"op": "step", "state": "s.npz"}\n', "step: field 'step' missing"),
                 ('{"op": "hello", "protocol": 1}\n', "hello twice")]
        for line, text in cases:
            with self.subTest(line):
                self.expect_error([], send(line), text)

    def test_bad_hello(self):
        for hello, text in (({"protocol": 2}, "protocol 2, this client speaks 1"),
                            ({"model": "mlp:6"}, "need at least an input and an output size"),
                            ({"dtype": "f16"}, "dtype 'f16': expected f32 or f64")):
            with self.subTest(text), FakeParity(ECHO) as p:
                msg = {"op": "hello", "protocol": 1, "model": MODEL, "dtype": "f64",
                       "batch": 5, "optim": sgd(0.1), **hello}
                p.send(msg)
                ans = p.recv()
                self.assertEqual(ans["op"], "error")
                self.assertIn(text, ans["message"])
                self.assertNotEqual(p.proc.wait(30), 0)

    def test_parity_gone(self):
        with FakeParity(ECHO) as p:
            p.hello(MODEL)
            os.close(p.wfd)
            p.wfd = None
            self.assertNotEqual(p.proc.wait(30), 0)
            self.assertIn("parity closed the pipe without 'quit'", p.log())

    def test_not_under_parity(self):
        env = {k: v for k, v in os.environ.items() if k != "PARITY_EXTERNAL"}
        r = subprocess.run(ECHO, env=env, capture_output=True, text=True, timeout=60)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("PARITY_EXTERNAL is not set", r.stderr)


class Ranks(unittest.TestCase):
    """Three ranks as threads of one process, with a broadcast over a barrier:
    every rank sees every request, only rank 0 opens the FIFOs and writes."""

    def run_ranks(self, lines, world=3):
        """Feeds `lines` to the session as parity would; (per-rank list of the
        ops seen, per-rank exception, what rank 0 wrote back)."""
        with tempfile.TemporaryDirectory() as d:
            for f in ("to-trainer", "from-trainer"):
                os.mkfifo(os.path.join(d, f))
            box, barrier = [None], threading.Barrier(world)
            seen, errors = [[] for _ in range(world)], [None] * world

            def broadcast(obj, rank):
                if rank == 0:
                    box[0] = obj
                barrier.wait()
                out = box[0]
                barrier.wait()
                return out

            def rank_main(r):
                try:
                    with Session(name="t", rank=r, world=world, folder=d if r == 0 else None,
                                 broadcast=lambda o: broadcast(o, r)) as s:
                        seen[r].append(s.hello.spec)
                        for req in s:
                            seen[r].append(req.op)
                            req.reply(req.state, 2.0)
                except Exception as e:   # noqa: BLE001 (kept for the assertion)
                    errors[r] = e

            threads = [threading.Thread(target=rank_main, args=(r,)) for r in range(world)]
            for t in threads:
                t.start()
            npz.save(os.path.join(d, "s.npz"), state())
            with open(os.path.join(d, "to-trainer"), "w") as w, \
                    open(os.path.join(d, "from-trainer")) as rd:
                for line in lines:
                    w.write(line + "\n")
                    w.flush()
                w.close()
                back = rd.read()
            for t in threads:
                t.join(30)
            return seen, errors, [json.loads(s) for s in back.splitlines()]

    def test_all_ranks_see_all_requests(self):
        hello = json.dumps({"op": "hello", "protocol": 1, "model": MODEL, "dtype": "f64",
                            "batch": 5, "optim": sgd(0.1)})
        step = json.dumps({"op": "step", "step": 1, "state": "s.npz", "batch": "b.npz",
                           "out": "o.npz", "intermediates": None})
        seen, errors, back = self.run_ranks([hello, step, step.replace('"step": 1', '"step": 2'),
                                             '{"op": "quit"}'])
        self.assertEqual(errors, [None] * 3)
        self.assertEqual(seen, [[MODEL, "step", "step"]] * 3)
        self.assertEqual([m["op"] for m in back], ["hello", "step", "step"])
        self.assertEqual(back[0]["world"], 3)

    def test_bad_message_stops_every_rank(self):
        hello = json.dumps({"op": "hello", "protocol": 1, "model": MODEL, "dtype": "f64",
                            "batch": 5, "optim": sgd(0.1)})
        seen, errors, back = self.run_ranks([hello, '{"op": "dance"}'])
        self.assertTrue(all(isinstance(e, ProtocolError) for e in errors), errors)
        self.assertIn("rank 0: parity sent an unknown message", str(errors[1]))
        self.assertEqual([m["op"] for m in back], ["hello", "error"])


if __name__ == "__main__":
    unittest.main()
