"""parity_ext.spec against parity: the views of each spec (names, shapes and
order) equal those of the .npz parity writes for it, the optimizer state's
names those of its checkpoints, and specs parity refuses are refused."""
import glob
import os
import subprocess
import tempfile
import unittest

import numpy as np

from util import PARITY, need_parity, parity, mnist_missing
from parity_ext import spec

SPECS = ["mlp:784-256-128-10", "mlp:784-10",
         "cnn:1x28x28-c32k3p1-r-f-fc128-r-fc10",
         "cnn:1x28x28-c4k3p1-bn-r-m2-c8k3-bn-r-m2-f-fc16-bn-r-fc10",
         "cnn:1x28x28-c4k5p2s2-th-m3-f-fc16-sg-fc10",
         "cnn:1x28x28-c3-f-bn-fc10"]
BAD = ["cnn:1x28x28-r-fc10", "cnn:1x28x28-fc10", "cnn:1x28x28-f-c4-fc10",
       "cnn:1x28x28-c4-r-r-f-fc10", "cnn:1x28x28-m2-bn-f-fc10", "mlp:784",
       "cnn:1x28x28-c4k30-f-fc10", "cnn:1x28x28-c4-f-fc10-r", "cnn:1x28x28-c4-bn-bn-f-fc10",
       "cnn:1x28x28-c4-q-f-fc10", "rnn:784-10"]


@unittest.skipIf(mnist_missing(), mnist_missing())
@need_parity
class SpecAgainstParity(unittest.TestCase):
    def test_views_equal_parity_npz(self):
        with tempfile.TemporaryDirectory() as tmp:
            for s in SPECS:
                with self.subTest(spec=s):
                    path = os.path.join(tmp, "init.npz")
                    parity("train", "--dataset", "mnist", "--model", s, "--act", "tanh",
                           "--steps", "1", "--quiet", "--init-save", path)
                    with np.load(path) as z:
                        theirs = [(k, z[k].shape) for k in z.files]
                    self.assertEqual(spec.parse(s, "tanh").views(), theirs)

    def test_optimizer_state_names_equal_checkpoint(self):
        s = SPECS[3]
        for optim in ("momentum", "adam"):
            with self.subTest(optim=optim), tempfile.TemporaryDirectory() as tmp:
                parity("train", "--dataset", "mnist", "--model", s, "--optim", optim,
                       "--steps", "1", "--quiet", "--checkpoint-dir", tmp)
                with np.load(glob.glob(os.path.join(tmp, "*.npz"))[0]) as z:
                    theirs = [(k, z[k].shape) for k in z.files]
                self.assertEqual(spec.state_names(spec.parse(s), optim), theirs)

    def test_refused_specs(self):
        for s in BAD:
            with self.subTest(spec=s):
                r = subprocess.run([PARITY, "train", "--dataset", "mnist", "--model", s,
                                    "--steps", "1", "--quiet"], capture_output=True)
                self.assertNotEqual(r.returncode, 0)
                with self.assertRaises(spec.SpecError):
                    spec.parse(s)


class SpecShapes(unittest.TestCase):
    def test_layer_numbering_and_sizes(self):
        m = spec.parse("cnn:3x32x32-c8k3p1s2-bn-r-m2-f-fc10")
        self.assertEqual([(L.index, L.kind, L.act) for L in m.layers],
                         [(0, "conv2d", "none"), (1, "batchnorm", "relu"),
                          (2, "maxpool", "none"), (3, "dense", "none")])
        self.assertEqual([L.n_out for L in m.layers], [8 * 16 * 16, 8 * 16 * 16, 8 * 8 * 8, 10])
        self.assertEqual(m.n_inputs, 3072)
        self.assertEqual(m.parameters(), ["layer0.weight", "layer0.bias", "layer1.weight",
                                          "layer1.bias", "layer3.weight", "layer3.bias"])
        self.assertEqual(m.feeds_bn(), {0})

    def test_mlp_activation(self):
        m = spec.parse("mlp:4-3-2", "sigmoid")
        self.assertEqual([L.act for L in m.layers], ["sigmoid", "none"])
        with self.assertRaises(spec.SpecError):
            spec.parse("mlp:4-3-2", "gelu")


if __name__ == "__main__":
    unittest.main()
