"""Long Monte Carlo campaigns (run with `python -m pytest -m slow`): width dependence of the O(1/N) theory."""
import numpy as np
import pytest

from resprop.numeric.engine.simulate import mean_and_se, simulate_kernels
from resprop.numeric.theories.fischer.field_theory import response
from resprop.numeric.theories.fischer.fluctuations import kernel_fluctuations

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


# --------------------------------------------------------------------------- Li, Nica & Roy
@pytest.mark.slow
def test_hypoactivation_constant_at_paper_setting():
    """App. C.3: C_{alpha,lambda} ~ -0.876 at alpha = lam = 1/sqrt2, n = d = 150 (the paper gives no error bar;
    we allow 4 SE + 0.02)."""
    from resprop.numeric.engine.monte_carlo import hypoactivation, simulate_log_gaussian

    a = 2**-0.5
    h = hypoactivation(simulate_log_gaussian(width=150, depth=150, alpha=a, lam=a, samples=20000, seed=150))
    assert abs(h["C_hat"] - (-0.876)) < 4 * h["C_hat_se"] + 0.02


@pytest.mark.slow
@pytest.mark.parametrize("n", [50, 100, 200])
def test_conjecture5_figure4_setting(n):
    """Fig. 4 (d = 200): absolute errors of eqs (11)-(13) scale as O(1/n^2) while the quantities are O(1/n):
    n^2 x |error| stays below 6 (measured 1-5 for n = 32..128 at d = 40)."""
    from resprop.numeric.engine.monte_carlo import conjecture5, simulate_log_gaussian
    from resprop.numeric.theories.lognormal.log_gaussian import conjecture5_theory

    a = 2**-0.5
    s = simulate_log_gaussian(width=n, depth=200, alpha=a, lam=a, samples=10000, seed=n)
    c5 = conjecture5(s)
    th = conjecture5_theory(n, a, a)
    assert n**2 * abs(c5["var_avg"] - th["var"]) < 6 + 4 * n**2 * c5["var_avg_se"]
    for k in (1, 2):
        assert n**2 * abs(c5["cov_avg"][k] - th["cov"][k]) < 6 + 4 * n**2 * c5["cov_avg_se"][k]
