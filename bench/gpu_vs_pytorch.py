#!/usr/bin/env python3
"""PyTorch's side of ci/gpu.sh: the default MLP (784-256-128-10, ReLU, SGD lr 0.01,
batch 64) on Fashion-MNIST's training split (the last 10% of the file held out,
as parity does), on the GPU with the data resident there, TF32 off. Runs
EPOCHS epochs REPEATS times in one process and prints one JSON line: the
seconds of every epoch of every repeat (each timed with the device
synchronised at its ends; no per-step synchronisation, PyTorch's usual loop)
and the test accuracy. MODE: default, or deterministic
(torch.use_deterministic_algorithms; CUBLAS_WORKSPACE_CONFIG set before
torch loads). Usage: gpu_vs_pytorch.py default|deterministic [f32|f64] [EPOCHS] [REPEATS]"""
import gzip
import json
import os
import sys
import time

mode = sys.argv[1] if len(sys.argv) > 1 else "default"
if mode == "deterministic":
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
import numpy as np  # noqa: E402
import torch  # noqa: E402

dtype = torch.float64 if len(sys.argv) > 2 and sys.argv[2] == "f64" else torch.float32
epochs = int(sys.argv[3]) if len(sys.argv) > 3 else 2
repeats = int(sys.argv[4]) if len(sys.argv) > 4 else 3
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
if mode == "deterministic":
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
dev = torch.device("cuda")
root = os.path.join(os.environ.get("PARITY_DATA", os.path.expanduser("~/.cache/parity/data")),
                    "fashion-mnist")


def idx(name, offset):
    path = os.path.join(root, name)
    if not os.path.exists(path):
        path = path[:-len(".gz")]
    with (gzip.open(path) if path.endswith(".gz") else open(path, "rb")) as f:
        return np.frombuffer(f.read(), dtype=np.uint8, offset=offset)


xtr = torch.tensor(idx("train-images-idx3-ubyte.gz", 16).reshape(-1, 784), dtype=dtype) / 255
ytr = torch.tensor(idx("train-labels-idx1-ubyte.gz", 8), dtype=torch.long)
xte = torch.tensor(idx("t10k-images-idx3-ubyte.gz", 16).reshape(-1, 784), dtype=dtype) / 255
yte = torch.tensor(idx("t10k-labels-idx1-ubyte.gz", 8), dtype=torch.long)
n_train = len(xtr) - len(xtr) // 10
xtr, ytr = xtr[:n_train].to(dev), ytr[:n_train].to(dev)
xte, yte = xte.to(dev), yte.to(dev)

seconds = []
acc = None
for r in range(repeats):
    torch.manual_seed(42 + r)
    model = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 10)).to(dev, dtype)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = torch.nn.CrossEntropyLoss()
    per = []
    for e in range(epochs):
        order = torch.randperm(n_train, device=dev)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for pos in range(0, n_train, 64):
            b = order[pos:pos + 64]
            opt.zero_grad()
            loss = loss_fn(model(xtr[b]), ytr[b])
            loss.backward()
            opt.step()
        torch.cuda.synchronize()
        per.append(time.perf_counter() - t0)
    seconds.append(per)
    with torch.no_grad():
        acc = (model(xte).argmax(1) == yte).double().mean().item()
print(json.dumps({"mode": mode, "dtype": str(dtype).replace("torch.", ""),
                  "torch": torch.__version__,
                  "device": torch.cuda.get_device_name(0), "cuda": torch.version.cuda,
                  "seconds": seconds, "test_accuracy": acc}))
