"""parity's datasets and batch order, read the way parity reads them.

Datasets: the four IDX files (MNIST, Fashion-MNIST) or the CIFAR-10 binary
batches, raw or .gz (raw preferred), found where parity finds them; pixels
scaled p / 255 in the run's dtype; the last 10% of the training file is
validation, so training records are rows 0 .. n_train - 1. Batch order: from
`parity data order` or from the `order` file of the step protocol. parity's
Philox shuffle is deliberately not re-implemented here: parity says the order.

Tested against parity's own batches (python/tests/test_data.py).
"""
import gzip
import os
import subprocess

import numpy as np

from .npz import dtype_of

VAL_PCT = 10   # par_dataset_open(..., 10) in parity train and parity data order
IDX_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
             "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")
CIFAR_FILES = tuple(f"data_batch_{i}.bin" for i in range(1, 6)) + ("test_batch.bin",)
CIFAR_SUB = "cifar-10-batches-bin"
CIFAR_RECORD = 1 + 3 * 32 * 32


class DataError(Exception):
    """The data could not be found or read as parity would (a setup problem)."""


def find_file(d, base):
    """d/base, else d/base.gz (raw preferred, as parity's find_file), else None."""
    for p in (os.path.join(d, base), os.path.join(d, base + ".gz")):
        if os.path.isfile(p):
            return p
    return None


def complete(d, files):
    return all(find_file(d, f) for f in files)


def dataset_dir(what):
    """(folder, 'idx' | 'cifar') of a dataset name or folder, as parity's
    par_dataset_open resolves it ($PARITY_DATA, ~/.cache/parity/data, Debian's
    fashion-mnist)."""
    if "/" in what:
        if not os.path.isdir(what):
            raise DataError(f"{what}: no such folder")
        if complete(what, IDX_FILES):
            return what, "idx"
        if any(find_file(what, f) for f in CIFAR_FILES):
            return what, "cifar"
        sub = os.path.join(what, CIFAR_SUB)
        if os.path.isdir(sub):
            return sub, "cifar"
        raise DataError(f"{what}: neither the four IDX files nor the CIFAR-10 binary files")
    fmt, files = ("cifar", CIFAR_FILES) if what == "cifar10" else ("idx", IDX_FILES)
    places = []
    for base in (os.environ.get("PARITY_DATA"),
                 os.path.join(os.environ["HOME"], ".cache/parity/data") if os.environ.get("HOME")
                 else None):
        if base:
            places.append(os.path.join(base, what))
            if fmt == "cifar":
                places.append(os.path.join(base, what, CIFAR_SUB))
    if what == "fashion-mnist":
        places.append("/usr/share/datasets/fashion-mnist")
    for p in places:
        if os.path.isdir(p) and complete(p, files):
            return p, fmt
    raise DataError(f"dataset {what}: not found in {', '.join(places)} (run data/fetch.sh)")


def read_bytes(path):
    with (gzip.open(path) if path.endswith(".gz") else open(path, "rb")) as f:
        return f.read()


def idx_array(path, magic, ndim):
    """The uint8 array of an IDX file whose magic and rank must be as given."""
    b = read_bytes(path)
    head = np.frombuffer(b, ">u4", count=1 + ndim)
    if head[0] != magic:
        raise DataError(f"{path}: IDX magic {head[0]:#x}, expected {magic:#x}")
    dims = [int(v) for v in head[1:]]
    data = np.frombuffer(b, np.uint8, offset=4 * (1 + ndim))
    if data.size != int(np.prod(dims)):
        raise DataError(f"{path}: {data.size} bytes of data, the header says {dims}")
    return data.reshape(dims)


def training_file(what):
    """The training file of a dataset name or folder: pixels (n, features)
    uint8 in (c, h, w) order, labels (n,), the image shape (C, H, W), and the
    folder it came from."""
    d, fmt = dataset_dir(what)
    if fmt == "idx":
        x = idx_array(find_file(d, IDX_FILES[0]), 0x803, 3)
        y = idx_array(find_file(d, IDX_FILES[1]), 0x801, 1)
        if len(x) != len(y):
            raise DataError(f"{d}: {len(x)} training images but {len(y)} labels")
        return x.reshape(len(x), -1), y, (1,) + x.shape[1:], d
    recs = []
    for f in CIFAR_FILES[:5]:
        p = find_file(d, f)
        if p is None:
            raise DataError(f"{d}: {f} missing")
        b = read_bytes(p)
        if len(b) % CIFAR_RECORD:
            raise DataError(f"{p}: {len(b)} bytes, not a multiple of {CIFAR_RECORD}")
        recs.append(np.frombuffer(b, np.uint8).reshape(-1, CIFAR_RECORD))
    r = np.concatenate(recs)
    return r[:, 1:], r[:, 0], (3, 32, 32), d


def n_train(n_file):
    """Training records of a training file of n_file records (the rest is validation)."""
    return n_file - n_file * VAL_PCT // 100


class Dataset:
    """A dataset's training records as parity's batches: `batch(records)` gives
    x (B, features) in the dtype, pixels / 255 (computed in that dtype, as
    parity's lookup table is), labels int32 and the records int64."""

    def __init__(self, what, dtype="f64"):
        self.pixels, self.labels, self.shape, self.dir = training_file(what)
        self.n_train = n_train(len(self.pixels))
        dt = dtype_of(dtype)
        self.lut = np.arange(256).astype(dt) / dt.type(255)

    def batch(self, records):
        """{'x', 'labels', 'records'} of the given training records, as the step
        protocol's batch .npz holds them."""
        records = np.asarray(records, dtype=np.int64)
        if records.size and (records.min() < 0 or records.max() >= self.n_train):
            bad = records[(records < 0) | (records >= self.n_train)][0]
            raise DataError(f"record {bad}: outside the {self.n_train} training records of "
                            f"{self.dir}")
        return {"x": self.lut[self.pixels[records]], "labels": self.labels[records].astype(np.int32),
                "records": records}


def epoch_order(parity, dataset, seed, epoch):
    """The 0-based training records of one epoch in parity's order, from
    `parity data order` (checked to be a permutation)."""
    cmd = [parity, "data", "order", "--dataset", dataset, "--seed", str(seed),
           "--epoch", str(epoch)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise DataError(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr.strip()}")
    order = np.array(r.stdout.split(), dtype=np.int64)
    if len(np.unique(order)) != len(order) or (len(order) and order.max() >= len(order)):
        raise DataError(f"{' '.join(cmd)}: not a permutation of 0..{len(order) - 1}")
    return order


def batches(parity, dataset, seed, batch, steps, n_records):
    """[(epoch, records)] of the first `steps` steps of batch `batch` over
    n_records training records: each epoch in parity's order, its last batch
    shorter when batch does not divide n_records."""
    out, epoch = [], 0
    while len(out) < steps:
        order = epoch_order(parity, dataset, seed, epoch)
        if len(order) != n_records:
            raise DataError(f"parity data order --epoch {epoch}: {len(order)} records, expected "
                            f"{n_records}")
        out += [(epoch, order[p:p + batch]) for p in range(0, n_records, batch)]
        epoch += 1
    return out[:steps]


def order_rows(order):
    """The records of each step of a protocol `order` array (steps, B): a row's
    negative entries are padding (a shorter last batch of an epoch) and dropped."""
    order = np.asarray(order)
    if order.ndim != 2 or order.dtype.kind not in "iu":
        raise DataError(f"order: expected an integer array (steps, batch), got {order.dtype} "
                        f"{order.shape}")
    return [row[row >= 0].astype(np.int64) for row in order]
