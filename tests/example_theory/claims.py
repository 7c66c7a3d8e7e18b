"""Claims of the example theory: the closed form equals the iterated recursion, and a simulation agrees."""
from resprop.numeric.report.claims import mc, ref, row, within

from example_theory import driver

SETTING = dict(input_kernel=1.0, depth=6, rho=0.5, sigma_w2=1.0, sigma_b2=0.1)


def claims(quick, step, figures_dir=None):
    gen = driver.generated()
    s = SETTING
    k = s["input_kernel"]
    for _ in range(s["depth"]):
        k = float(gen.kernel_update(k, s["rho"], s["sigma_w2"], s["sigma_b2"]))
    closed = driver.mean_kernel(**s)
    rows = [row("K^(L): closed form (rsolve) = iterated recursion", "eq. 2 = eq. 1 iterated", closed,
                ref(k, "kernel_update applied L = 6 times"), passed=abs(closed - k) <= 1e-12 * abs(k),
                check="relative difference <= 1e-12")]
    samples = 400 if quick else 4000
    mean, se = driver.simulate_kernel(width=16, samples=samples, seed=3, **s)
    rows.append(row("E[K^(L)] at width 16 (exact at every width)", "eq. 2", closed,
                    mc(mean, se, f"{samples} linear ResNets of width 16, seed 3"),
                    passed=within(mean, se, closed), check="|MC - theory| <= 4 SE (no systematic term: exact)"))
    step()
    return rows, {}
