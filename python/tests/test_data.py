"""parity_ext.data against parity: the pixels and label that parity trains on
for a record equal those Dataset.batch gives, on MNIST (IDX), a synthetic
CIFAR-10 folder (parity data make-cifar) and the same folder gzipped.

How parity's own input is read back: one f64 SGD step of mlp:F-10 on a batch
of one record with lr 1 from zero biases leaves b1 = -dz (the label is its
only positive entry) and W1 - W0 = -dz x^T, so x = (W1 - W0)[o] / b1[o]."""
import gzip
import os
import shutil
import tempfile
import unittest

import numpy as np

from util import PARITY, need_parity, parity, mnist_missing
from parity_ext import data

SEEDS = (1, 7, 12)


def parity_input(dataset, features, seed, tmp):
    """(x, label) of the first record of parity's order for seed, as parity
    trained on it, read back from one step's weights."""
    init, out = os.path.join(tmp, "i.npz"), os.path.join(tmp, "o.npz")
    parity("train", "--dataset", dataset, "--model", f"mlp:{features}-10", "--dtype", "f64",
           "--batch", "1", "--steps", "1", "--lr", "1", "--seed", seed, "--quiet",
           "--init-save", init, "--save", out)
    with np.load(init) as a, np.load(out) as b:
        w0, w1, b1 = a["layer0.weight"], b["layer0.weight"], b["layer0.bias"]
    label = int(np.argmax(b1))
    return (w1 - w0)[label] / b1[label], label


@need_parity
class AgainstParity(unittest.TestCase):
    def check_dataset(self, dataset):
        ds = data.Dataset(dataset, "f64")
        with tempfile.TemporaryDirectory() as tmp:
            for seed in SEEDS:
                with self.subTest(dataset=dataset, seed=seed):
                    b = ds.batch(data.epoch_order(PARITY, dataset, seed, 0)[:1])
                    x, label = parity_input(dataset, ds.pixels.shape[1], seed, tmp)
                    self.assertEqual(int(b["labels"][0]), label)
                    np.testing.assert_allclose(b["x"][0], x, rtol=0, atol=1e-12)
                    self.assertEqual(b["x"].dtype, np.float64)

    @unittest.skipIf(mnist_missing(), mnist_missing())
    def test_mnist(self):
        self.check_dataset("mnist")

    def test_cifar_raw_and_gz(self):
        with tempfile.TemporaryDirectory() as tmp:
            raw, gz = os.path.join(tmp, "raw"), os.path.join(tmp, "gz")
            parity("data", "make-cifar", raw, "--records", "20", "--seed", "3")
            os.mkdir(gz)
            for f in os.listdir(raw):
                with open(os.path.join(raw, f), "rb") as src, \
                        gzip.open(os.path.join(gz, f + ".gz"), "wb") as dst:
                    shutil.copyfileobj(src, dst)
            self.check_dataset(raw)
            self.check_dataset(gz)
            a, b = data.Dataset(raw, "f32"), data.Dataset(gz, "f32")
            self.assertEqual((a.n_train, a.shape), (90, (3, 32, 32)))
            self.assertEqual(a.batch(range(90))["x"].tobytes(), b.batch(range(90))["x"].tobytes())


@need_parity
class Order(unittest.TestCase):
    def test_batches_cross_epochs(self):
        with tempfile.TemporaryDirectory() as tmp:
            d = os.path.join(tmp, "c")
            parity("data", "make-cifar", d, "--records", "10", "--seed", "1")
            n = data.Dataset(d).n_train   # 45: batches of 20, 20, 5 per epoch
            got = data.batches(PARITY, d, 4, 20, 5, n)
            e0, e1 = (data.epoch_order(PARITY, d, 4, e) for e in (0, 1))
            self.assertEqual([e for e, _ in got], [0, 0, 0, 1, 1])
            self.assertEqual([len(r) for _, r in got], [20, 20, 5, 20, 20])
            self.assertEqual(np.concatenate([r for _, r in got[:3]]).tolist(), e0.tolist())
            self.assertEqual(got[3][1].tolist(), e1[:20].tolist())
            self.assertNotEqual(e0.tolist(), e1.tolist())

    def test_order_rows_padding(self):
        rows = data.order_rows(np.array([[3, 1, 2], [4, 0, -1]], dtype=np.int64))
        self.assertEqual([r.tolist() for r in rows], [[3, 1, 2], [4, 0]])
        with self.assertRaises(data.DataError):
            data.order_rows(np.zeros(3))


if __name__ == "__main__":
    unittest.main()
