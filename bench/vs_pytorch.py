#!/usr/bin/env python3
"""PyTorch side of bench/vs_pytorch.sh: one epoch, batch 64, the last 10% of
the training file held out as in parity, of
  mlp: Fashion-MNIST, MLP 784-256-128-10 (ReLU), SGD lr 0.01;
  cnn: MNIST, the fourth study's CNN (conv 1->32 3x3 padding 1, ReLU,
       flatten, fc 128, ReLU, fc 10), Adam lr 0.001.
Prints seconds per epoch (the training loop only) and test accuracy as one
JSON line. Usage: vs_pytorch.py THREADS [f32|f64] [mlp|cnn]"""
import gzip, json, os, sys, time

import numpy as np
import torch

threads = int(sys.argv[1])
dtype = torch.float64 if len(sys.argv) > 2 and sys.argv[2] == "f64" else torch.float32
cnn = len(sys.argv) > 3 and sys.argv[3] == "cnn"
torch.set_num_threads(threads)
root = os.environ.get("PARITY_DATA", os.path.expanduser("~/.cache/parity/data"))
root += "/mnist" if cnn else "/fashion-mnist"


def idx(name, offset):
    path = os.path.join(root, name)
    if not os.path.exists(path):   # MNIST's files come from npm without .gz
        path = path[:-len(".gz")]
    with (gzip.open(path) if path.endswith(".gz") else open(path, "rb")) as f:
        return np.frombuffer(f.read(), dtype=np.uint8, offset=offset)


xtr = torch.tensor(idx("train-images-idx3-ubyte.gz", 16).reshape(-1, 784), dtype=dtype) / 255
ytr = torch.tensor(idx("train-labels-idx1-ubyte.gz", 8), dtype=torch.long)
xte = torch.tensor(idx("t10k-images-idx3-ubyte.gz", 16).reshape(-1, 784), dtype=dtype) / 255
yte = torch.tensor(idx("t10k-labels-idx1-ubyte.gz", 8), dtype=torch.long)
n_train = len(xtr) - len(xtr) // 10
xtr, ytr = xtr[:n_train], ytr[:n_train]

torch.manual_seed(42)
if cnn:
    xtr, xte = xtr.reshape(-1, 1, 28, 28), xte.reshape(-1, 1, 28, 28)
    model = torch.nn.Sequential(torch.nn.Conv2d(1, 32, 3, padding=1), torch.nn.ReLU(),
                                torch.nn.Flatten(), torch.nn.Linear(32 * 28 * 28, 128),
                                torch.nn.ReLU(), torch.nn.Linear(128, 10)).to(dtype)
    opt = torch.optim.Adam(model.parameters(), lr=0.001)
else:
    model = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 10)).to(dtype)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
loss_fn = torch.nn.CrossEntropyLoss()
order = torch.randperm(n_train)
t0 = time.perf_counter()
for pos in range(0, n_train, 64):
    b = order[pos:pos + 64]
    opt.zero_grad()
    loss = loss_fn(model(xtr[b]), ytr[b])
    loss.backward()
    opt.step()
seconds = time.perf_counter() - t0
with torch.no_grad():
    acc = (model(xte).argmax(1) == yte).double().mean().item()
print(json.dumps({"threads": threads, "seconds": seconds, "test_accuracy": acc}))
