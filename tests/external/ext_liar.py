#!/usr/bin/env python3
"""A trainer that breaks the step protocol one way, for tests/external/test_external.sh.

MODE (argv[1]; argv[2], when there, only tags the process for the test):
noproto (never opens the FIFOs), crash0 (exits before
them), crash (exits during step 1), hang (never answers step 1), shape,
nan, missing, dtype (a wrong array in out.npz), garbage (a line that is
not JSON), error (answers with an error message), stepno (answers the
wrong step). Otherwise it hands parity's own state back unchanged. A `run`
(parity bisect --external) it answers with a log of loss 2.3 and its
starting state as every snapshot, or: shortlog (a line short), nanlog (a
loss NaN), nosnap (no snapshot written), runsteps (answers another count).
"""
import json, os, sys, time
import numpy as np
mode = sys.argv[1]
D = os.environ["PARITY_EXTERNAL"]
if mode == "noproto": time.sleep(30); sys.exit(0)
if mode == "crash0": print("Traceback: boom at import", file=sys.stderr); sys.exit(7)
fin = open(os.path.join(D, "to-trainer")); fout = open(os.path.join(D, "from-trainer"), "w")
def send(o): fout.write(json.dumps(o) + "\n"); fout.flush()
hello = json.loads(fin.readline())
send({"op": "hello", "protocol": 1, "name": "liar-" + mode, "world": 1})
for line in fin:
    req = json.loads(line)
    if req["op"] == "quit": break
    st = dict(np.load(req["state"]))
    if mode == "error": send({"op": "error", "message": "CUDA not available"}); continue
    if req["op"] == "run":
        n = req["steps"]
        with open(req["log"] + ".part", "w") as f:
            for t in range(1, n + (0 if mode == "shortlog" else 1)):
                loss = float("nan") if mode == "nanlog" and t == 2 else 2.3
                f.write(json.dumps({"step": t, "loss": loss, "seconds": 0.01}) + "\n")
        os.rename(req["log"] + ".part", req["log"])
        for snap in req["snapshots"] if mode != "nosnap" else []:
            np.savez(snap["path"] + ".part.npz", **st)
            os.rename(snap["path"] + ".part.npz", snap["path"])
        send({"op": "run", "steps": n + (1 if mode == "runsteps" else 0)})
        continue
    if mode == "crash": print("RuntimeError: out of memory in step", file=sys.stderr); sys.exit(1)
    if mode == "hang": time.sleep(60)
    if mode == "shape": st["layer0.weight"] = st["layer0.weight"][:, :10]
    if mode == "nan": st["layer1.bias"][3] = np.nan
    if mode == "missing": del st["layer1.bias"]
    if mode == "dtype": st["layer0.bias"] = st["layer0.bias"].astype(np.float64)
    if mode == "garbage": fout.write("this is not json\n"); fout.flush(); continue
    np.savez(req["out"] + ".part.npz", **st); os.rename(req["out"] + ".part.npz", req["out"])
    send({"op": "step", "step": req["step"] + (1 if mode == "stepno" else 0), "loss": 2.3})
