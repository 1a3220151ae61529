#!/usr/bin/env python3
"""PyTorch's side of ci/gpu.sh, batch 64, the last 10% of the training file
held out as parity does, on the GPU with the data resident there, TF32 off:
  mlp (default): the default MLP (784-256-128-10, ReLU), SGD lr 0.01,
       Fashion-MNIST (54,000 records, 844 steps an epoch);
  cnn: the MNIST CNN (conv 1->32 3x3 padding 1, ReLU, flatten, fc 128, ReLU,
       fc 10; parity's cnn:1x28x28-c32k3p1-r-f-fc128-r-fc10), Adam lr 0.001,
       MNIST (54,000 records, 844 steps);
  cifar DIR: the CIFAR CNN with batchnorm of bench/vs_pytorch.sh (three
       blocks conv 3x3 padding 1 -> BatchNorm2d -> ReLU -> max-pool 2,
       3->32->64->128, fc 256, ReLU, fc 10), SGD lr 0.01, on the CIFAR-10
       format files in DIR (`parity data make-cifar DIR --records 10000`:
       45,000 records, 704 steps).
Runs EPOCHS epochs REPEATS times in one process and prints one JSON line:
the model, the steps of an epoch, the seconds of every epoch of every repeat
(each timed with the device synchronised at its ends; no per-step
synchronisation, PyTorch's usual loop) and the test accuracy. MODE: default,
or deterministic (torch.use_deterministic_algorithms; CUBLAS_WORKSPACE_CONFIG
set before torch loads).
Usage: gpu_vs_pytorch.py default|deterministic [f32|f64] [EPOCHS] [REPEATS] [mlp|cnn|cifar DIR]"""
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
what = sys.argv[5] if len(sys.argv) > 5 else "mlp"
if what not in ("mlp", "cnn", "cifar") or (what == "cifar") != (len(sys.argv) == 7):
    sys.exit("usage: gpu_vs_pytorch.py default|deterministic [f32|f64] [EPOCHS] [REPEATS] "
             "[mlp|cnn|cifar DIR]")
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
if mode == "deterministic":
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
# Not flags: a check of this script on a machine without a GPU runs it on the
# CPU with short epochs (GPU_VS_PYTORCH_DEVICE=cpu GPU_VS_PYTORCH_STEPS=20).
dev = torch.device(os.environ.get("GPU_VS_PYTORCH_DEVICE", "cuda"))
max_steps = int(os.environ.get("GPU_VS_PYTORCH_STEPS", "0")) or None
data = os.environ.get("PARITY_DATA", os.path.expanduser("~/.cache/parity/data"))


def idx(folder, name, offset):
    path = os.path.join(data, folder, name)
    if not os.path.exists(path):   # MNIST's files may be there without .gz
        path = path[:-len(".gz")]
    with (gzip.open(path) if path.endswith(".gz") else open(path, "rb")) as f:
        return np.frombuffer(f.read(), dtype=np.uint8, offset=offset)


def idx_split(folder, split):
    x = idx(folder, f"{split}-images-idx3-ubyte.gz", 16).reshape(-1, 1, 28, 28)
    return (torch.tensor(x, dtype=dtype) / 255,
            torch.tensor(idx(folder, f"{split}-labels-idx1-ubyte.gz", 8), dtype=torch.long))


def cifar(d, names):
    """CIFAR-10 binary records: label byte, then 3x32x32 pixels (c, h, w)."""
    r = np.concatenate([np.fromfile(os.path.join(d, n), np.uint8).reshape(-1, 3073)
                        for n in names])
    return (torch.tensor(r[:, 1:].reshape(-1, 3, 32, 32), dtype=dtype) / 255,
            torch.tensor(r[:, 0].astype(np.int64)))


if what == "cifar":
    xtr, ytr = cifar(sys.argv[6], [f"data_batch_{i}.bin" for i in range(1, 6)])
    xte, yte = cifar(sys.argv[6], ["test_batch.bin"])
else:
    folder = "mnist" if what == "cnn" else "fashion-mnist"
    (xtr, ytr), (xte, yte) = idx_split(folder, "train"), idx_split(folder, "t10k")
    if what == "mlp":
        xtr, xte = xtr.reshape(-1, 784), xte.reshape(-1, 784)
n_train = len(xtr) - len(xtr) // 10
starts = list(range(0, n_train, 64))[:max_steps]
if max_steps:
    xte, yte = xte[:len(starts) * 64], yte[:len(starts) * 64]
xtr, ytr = xtr[:n_train].to(dev), ytr[:n_train].to(dev)
xte, yte = xte.to(dev), yte.to(dev)


def build():
    nn = torch.nn
    if what == "cifar":
        def block(c_in, c_out):
            return [nn.Conv2d(c_in, c_out, 3, padding=1), nn.BatchNorm2d(c_out), nn.ReLU(),
                    nn.MaxPool2d(2)]
        model = nn.Sequential(*block(3, 32), *block(32, 64), *block(64, 128), nn.Flatten(),
                              nn.Linear(128 * 4 * 4, 256), nn.ReLU(), nn.Linear(256, 10))
    elif what == "cnn":
        model = nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.Flatten(),
                              nn.Linear(32 * 28 * 28, 128), nn.ReLU(), nn.Linear(128, 10))
    else:
        model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                              nn.Linear(128, 10))
    model = model.to(dev, dtype)
    if what == "cnn":
        return model, torch.optim.Adam(model.parameters(), lr=0.001)
    return model, torch.optim.SGD(model.parameters(), lr=0.01)


def sync():
    if dev.type == "cuda":
        torch.cuda.synchronize()


seconds = []
acc = None
for r in range(repeats):
    torch.manual_seed(42 + r)
    model, opt = build()
    loss_fn = torch.nn.CrossEntropyLoss()
    per = []
    for e in range(epochs):
        model.train()
        order = torch.randperm(n_train, device=dev)
        sync()
        t0 = time.perf_counter()
        for pos in starts:
            b = order[pos:pos + 64]
            opt.zero_grad()
            loss = loss_fn(model(xtr[b]), ytr[b])
            loss.backward()
            opt.step()
        sync()
        per.append(time.perf_counter() - t0)
    seconds.append(per)
    model.eval()
    with torch.no_grad():   # in slices: the CNNs' activations of 10,000 images at once are large
        hits = sum((model(xte[i:i + 1000]).argmax(1) == yte[i:i + 1000]).sum().item()
                   for i in range(0, len(xte), 1000))
    acc = hits / len(xte)
print(json.dumps({"mode": mode, "model": what, "dtype": str(dtype).replace("torch.", ""),
                  "steps_per_epoch": len(starts), "torch": torch.__version__,
                  "device": torch.cuda.get_device_name(0) if dev.type == "cuda" else str(dev),
                  "cuda": torch.version.cuda, "seconds": seconds, "test_accuracy": acc}))
