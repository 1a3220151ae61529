"""parity_ext.npz: round trips keep names, order, shapes, dtypes and bits;
saving is atomic (no .part left, an old file intact after a failure);
check() names the array at fault; parity reads what npz.save writes."""
import os
import tempfile
import unittest

import numpy as np

from util import need_parity, parity, mnist_missing
from parity_ext import npz, spec


class RoundTrip(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.tmp.name, "w.npz")

    def tearDown(self):
        self.tmp.cleanup()

    def test_names_order_bits(self):
        rng = np.random.default_rng(3)
        arrays = {"layer1.weight": rng.standard_normal((3, 2)).astype(np.float32),
                  "layer0.bias": rng.standard_normal(4),
                  "layer0.weight": np.asfortranarray(rng.standard_normal((4, 5))),
                  "records": np.arange(5, dtype=np.int64)}
        npz.save(self.path, arrays)
        back = npz.load(self.path)
        self.assertEqual(list(back), list(arrays))
        for k, a in arrays.items():
            self.assertEqual(back[k].dtype, a.dtype)
            self.assertEqual(back[k].tobytes(), np.ascontiguousarray(a).tobytes())
        self.assertEqual(os.listdir(self.tmp.name), ["w.npz"])
        with np.load(self.path) as z:   # C order on disk (parity refuses fortran_order)
            self.assertTrue(z["layer0.weight"].flags.c_contiguous)

    def test_failed_save_keeps_old_file(self):
        npz.save(self.path, {"a": np.zeros(2)})
        with self.assertRaises(Exception):
            npz.save(self.path, {"a": np.zeros(2), "b": object()})
        self.assertEqual(os.listdir(self.tmp.name), ["w.npz"])
        self.assertEqual(list(npz.load(self.path)), ["a"])

    def test_load_garbage(self):
        with open(self.path, "w") as f:
            f.write("not a zip")
        with self.assertRaisesRegex(npz.NpzError, "w.npz: cannot read"):
            npz.load(self.path)


class Check(unittest.TestCase):
    def setUp(self):
        self.layout = npz.expected_state(spec.parse("mlp:4-3-2"), "f32", "momentum")
        self.good = {n: np.zeros(s, d) for n, (s, d) in self.layout.items()}

    def test_good(self):
        npz.check(self.good, self.layout, "f")

    def test_faults_named(self):
        cases = [("missing", lambda a: a.pop("layer1.bias"), "'layer1.bias' missing"),
                 ("extra", lambda a: a.update(z=np.zeros(1)), "'z' is not expected"),
                 ("shape", lambda a: a.update({"layer0.weight": np.zeros((4, 3), np.float32)}),
                  r"'layer0.weight' has shape \(4, 3\), expected \(3, 4\)"),
                 ("dtype", lambda a: a.update({"opt.velocity.layer0.bias": np.zeros(3)}),
                  "'opt.velocity.layer0.bias' has dtype <f8, expected <f4")]
        for name, change, message in cases:
            with self.subTest(name):
                a = dict(self.good)
                change(a)
                with self.assertRaisesRegex(npz.NpzError, "^f: array " + message):
                    npz.check(a, self.layout, "f")

    def test_intermediates_layout(self):
        m = spec.parse("cnn:1x6x6-c2k3-bn-r-m2-f-fc3")
        lay = npz.expected_intermediates(m, "f64", 5)
        self.assertEqual(lay["layer0.out"][0], (5, 2 * 4 * 4))
        self.assertEqual(lay["layer2.dz"][0], (5, 2 * 2 * 2))
        self.assertEqual(lay["loss.samples"][0], (5,))
        self.assertEqual(lay["grad.layer3.weight"][0], (3, 8))
        self.assertNotIn("grad.layer1.running_mean", lay)


@unittest.skipIf(mnist_missing(), mnist_missing())
@need_parity
class ParityReadsOurs(unittest.TestCase):
    def test_init_load_of_a_resaved_file(self):
        """parity trains bit for bit the same from its own init.npz and from
        that file loaded and saved again by npz (f32 and f64)."""
        with tempfile.TemporaryDirectory() as tmp:
            p = lambda f: os.path.join(tmp, f)
            for dt in ("f32", "f64"):
                run = ["train", "--dataset", "mnist", "--model", "cnn:1x28x28-c4k3p1-bn-r-m2-f-fc10",
                       "--dtype", dt, "--steps", "2", "--quiet", "--no-digest"]
                parity(*run, "--init-save", p("init.npz"), "--save", p("a.npz"))
                npz.save(p("again.npz"), npz.load(p("init.npz")))
                parity(*run, "--init-load", p("again.npz"), "--save", p("b.npz"))
                a, b = npz.load(p("a.npz")), npz.load(p("b.npz"))
                self.assertEqual(list(a), list(b))
                for k in a:
                    self.assertEqual(a[k].tobytes(), b[k].tobytes(), k)


if __name__ == "__main__":
    unittest.main()
