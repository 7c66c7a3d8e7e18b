"""Claims of the example theory, declared once (:class:`resprop.numeric.report.claims.Claim`): the closed form
equals the iterated recursion, and a finite-width simulation agrees with the (exact) mean kernel."""
from example_theory import driver
from resprop.numeric.report.claims import Claim, Criterion, Evidence, Tolerance, evaluate_claims, mc, ref

SETTING = dict(input_kernel=1.0, depth=6, rho=0.5, sigma_w2=1.0, sigma_b2=0.1)


def _closed_vs_recursion(ctx) -> Evidence:
    gen, s = driver.generated(), SETTING
    k = s["input_kernel"]
    for _ in range(s["depth"]):
        k = float(gen.kernel_update(k, s["rho"], s["sigma_w2"], s["sigma_b2"]))
    closed = driver.mean_kernel(**s)
    return Evidence(closed, ref(k, "kernel_update applied L = 6 times"), holds=abs(closed - k) <= 1e-12 * abs(k))


def _simulation(ctx) -> Evidence:
    samples = 400 if ctx.quick else 4000
    closed = driver.mean_kernel(**SETTING)
    mean, se = driver.simulate_kernel(width=16, samples=samples, seed=3, **SETTING)
    return Evidence(closed, mc(mean, se, f"{samples} linear ResNets of width 16, seed 3"),
                    compare=(mean, se, closed, 0.0))


CLAIMS = [
    Claim("linear", "closed-form", "K^(L): closed form (rsolve) = iterated recursion", "eq. 2 = eq. 1 iterated",
          Criterion("relative difference <= 1e-12"), _closed_vs_recursion),
    Claim("linear", "width-16", "E[K^(L)] at width 16 (exact at every width)", "eq. 2",
          Tolerance(k=4, why="no systematic term: the mean recursion is exact at every width"), _simulation),
]


def claims(quick, step, figures_dir=None):
    return evaluate_claims(CLAIMS, quick, step, figures_dir), {}
