"""tools/bench_engine.py's paired interval: the geometric mean of per-round
ratios and its 95% confidence interval (Student's t on the log-ratios).

The t quantiles are a table in the tool; here they are checked against the
t distribution's CDF integrated numerically from its density (NumPy), and
the interval against hand-worked values and its symmetries."""
import math
import os
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
import bench_engine  # noqa: E402


def t_cdf(x, df):
    """P(T <= x) for x > 0: 1/2 plus the density's integral over [0, x] (Simpson, fine grid)."""
    c = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)
    u = np.linspace(0.0, x, 20001)
    f = c * (1 + u * u / df) ** (-(df + 1) / 2)
    h = u[1] - u[0]
    return 0.5 + h / 3 * (f[0] + f[-1] + 4 * f[1:-1:2].sum() + 2 * f[2:-1:2].sum())


class PairedInterval(unittest.TestCase):
    def test_t_table_is_the_975_quantile(self):
        for df, q in bench_engine.T975.items():
            lo, hi = 1.0, 20.0  # bisection for the quantile itself
            while hi - lo > 1e-6:
                mid = (lo + hi) / 2
                lo, hi = (mid, hi) if t_cdf(mid, df) < 0.975 else (lo, mid)
            self.assertAlmostEqual(q, lo, delta=6e-4, msg=f"df {df}")  # the table's 3 decimals

    def test_hand_worked_two_rounds(self):
        # logs 0 and 0.1: mean 0.05, sd 0.1/sqrt(2), half-width 12.706 * sd / sqrt(2) = 0.6353
        m, lo, hi = bench_engine.paired_interval([1.0, math.exp(0.1)])
        self.assertAlmostEqual(m, math.exp(0.05), places=12)
        self.assertAlmostEqual(lo, math.exp(0.05 - 0.63530), places=4)
        self.assertAlmostEqual(hi, math.exp(0.05 + 0.63530), places=4)

    def test_equal_rounds_give_a_point_and_inversion_mirrors(self):
        for value in bench_engine.paired_interval([1.1] * 5):
            self.assertAlmostEqual(value, 1.1, places=12)
        ratios = [1.01, 0.99, 1.16, 0.98, 0.93, 0.98, 1.00, 0.94]
        m, lo, hi = bench_engine.paired_interval(ratios)
        mi, loi, hii = bench_engine.paired_interval([1 / r for r in ratios])
        self.assertAlmostEqual(mi, 1 / m, places=12)
        self.assertAlmostEqual(loi, 1 / hi, places=12)
        self.assertAlmostEqual(hii, 1 / lo, places=12)
        self.assertLess(lo, 1.0)  # these rounds (an A/B of 2026-12-07) cannot tell the variants apart
        self.assertGreater(hi, 1.0)

    def test_a_consistent_gain_excludes_one_and_too_few_rounds_give_none(self):
        m, lo, hi = bench_engine.paired_interval([1.10, 1.12, 1.09, 1.11])
        self.assertGreater(lo, 1.05)
        self.assertLess(hi, 1.15)
        self.assertIsNone(bench_engine.paired_interval([1.2]))
        self.assertIsNone(bench_engine.paired_interval([]))


if __name__ == "__main__":
    unittest.main()
