"""The PyTorch DDP example's negative controls under the step protocol: each
--bug moves some step's answer further than 1e-9 from parity's reference
(f64, MLP, batch 17). The ones about ranks run under torchrun at world 2,
lr and tf32 in one plain process."""
import unittest

from util import HAVE_TORCH, mnist_missing, need_parity
from test_examples_torch import MLP, PLAIN, TorchCase, torchrun


@unittest.skipUnless(HAVE_TORCH, "python3-torch is not installed")
@unittest.skipIf(mnist_missing(), mnist_missing())
@need_parity
class TorchBugs(TorchCase):
    def caught(self, cmd):
        loss, (w, _) = self.errors(self.run_torch(cmd, MLP), MLP)
        return max(loss, w)

    def test_rank_bugs_world2(self):
        for bug in ("world", "unreduced", "stale", "drop"):
            with self.subTest(bug=bug):
                self.assertGreater(self.caught(torchrun(2, "--bug", bug)), 1e-9)

    def test_arithmetic_bugs(self):
        for bug in ("lr", "tf32"):
            with self.subTest(bug=bug):
                self.assertGreater(self.caught(PLAIN + ["--bug", bug]), 1e-9)


if __name__ == "__main__":
    unittest.main()
