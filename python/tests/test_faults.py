"""parity_ext.faults.round_mantissa: TF32's rounding (10 explicit mantissa
bits, to nearest, ties to even) on f32 and f64, by its definition."""
import unittest

import numpy as np

import util  # noqa: F401 (puts parity_ext on sys.path)

from parity_ext.faults import round_mantissa


class RoundMantissa(unittest.TestCase):
    def test_ties_and_halves(self):
        u = 2.0 ** -10   # one unit in the last place at 10 bits, for values in [1, 2)
        for dt in (np.float32, np.float64):
            with self.subTest(dtype=dt.__name__):
                x = np.array([1 + u / 2, 1 + 3 * u / 2, 1 + u / 2 + u / 8, 1 + u, -(1 + 3 * u / 2),
                              2 - u / 4], dt)
                want = np.array([1, 1 + 2 * u, 1 + u, 1 + u, -(1 + 2 * u), 2], dt)
                self.assertEqual(round_mantissa(x).tobytes(), want.tobytes())

    def test_at_most_ten_bits_and_specials(self):
        rng = np.random.default_rng(5)
        for dt in (np.float32, np.float64):
            x = (rng.standard_normal(1000) * 10.0 ** rng.integers(-20, 20, 1000)).astype(dt)
            r = round_mantissa(x)
            m, _ = np.frexp(r)   # r = m 2^e, 0.5 <= |m| < 1: 11 significant bits at most
            self.assertTrue(np.all(m * 2 ** 11 == np.round(m * 2 ** 11)))
            self.assertTrue(np.all(np.abs(r - x) <= np.abs(x) * 2.0 ** -11))
            s = round_mantissa(np.array([np.inf, -np.inf, np.nan, 0.0, -0.0], dt))
            self.assertEqual(s[:2].tolist(), [np.inf, -np.inf])
            self.assertTrue(np.isnan(s[2]))
            self.assertEqual(np.signbit(s[3:]).tolist(), [False, True])


if __name__ == "__main__":
    unittest.main()
