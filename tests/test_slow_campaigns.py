"""Long Monte Carlo campaigns (run with `python -m pytest -m slow`): width dependence of the O(1/N) theory."""
import numpy as np
import pytest

from numeric.field_theory import response
from numeric.fluctuations import kernel_fluctuations
from numeric.simulate import mean_and_se, simulate_kernels

FIG2 = dict(rho=1.0, sigma_w2=1.2, sigma_b2=0.2)


@pytest.mark.slow
@pytest.mark.parametrize("width", [125, 250, 1000])
def test_fluctuations_scale_as_inverse_width(width):
    """N Var C^(l) is width independent at leading order: theory vs 20000 simulated networks per width."""
    L = 20
    sim = simulate_kernels(np.ones((1, 100)), depth=L, width=width, samples=20000, seed=width, **FIG2)
    fl = kernel_fluctuations(1.4, L, width, **FIG2)
    c = sim["C"][:, 1:, 0, 0]
    var = c.var(axis=0, ddof=1)
    se = np.sqrt(np.maximum(((c - c.mean(0)) ** 4).mean(0) - var**2, 0) / c.shape[0])
    assert np.all(np.abs(var - fl["var_C"][1:L + 1]) <= 4 * se + 10 / width * fl["var_C"][1:L + 1])


@pytest.mark.slow
def test_mean_kernel_bias_is_order_inverse_width():
    """The deviation of the simulated mean C^(l) from C*^(l) shrinks with width (20000 networks per width)."""
    L = 20
    theory = response(1.4, L, **FIG2)["C"][1:]
    devs = []
    for width in (50, 200):
        sim = simulate_kernels(np.ones((1, 100)), depth=L, width=width, samples=20000, seed=3, **FIG2)
        mean, se = mean_and_se(sim["C"][:, 1:, 0, 0])
        devs.append(np.abs(mean - theory).mean())
    assert devs[1] < devs[0]
