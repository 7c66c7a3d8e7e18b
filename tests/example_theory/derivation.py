"""Derivation of the example theory: the recursion and its closed form, solved by SymPy (rsolve)."""
import sympy as sp

from resprop.derive.results import Derivation, Input

PAPER = "example_linear"

K, K0, rho, sigma_w2, sigma_b2 = sp.symbols("K K_0 rho sigma_w2 sigma_b2", nonnegative=True)
depth = sp.Symbol("depth", integer=True, nonnegative=True)

LATEX_NAMES = {K: "K", K0: "K_{0}", rho: r"\rho", sigma_w2: r"\sigma_{w}^{2}", sigma_b2: r"\sigma_{b}^{2}",
               depth: "L"}


def kernel_update() -> sp.Expr:
    """E[K^(l+1)] given K^(l): the cross terms h.W h and h.b vanish in expectation, |W h|^2/width -> K."""
    return (1 + rho**2 * sigma_w2) * K + rho**2 * sigma_b2


def kernel_closed_form() -> sp.Expr:
    """K^(L) from K^(0) = K_0, by solving the linear recursion with sympy.rsolve."""
    k = sp.Function("k")
    a, c = 1 + rho**2 * sigma_w2, rho**2 * sigma_b2
    sol = sp.rsolve(k(depth + 1) - a * k(depth) - c, k(depth), {k(0): K0})
    return sp.simplify(sol)


def derive_linear() -> Derivation:
    dv = Derivation("linear", "Deep linear residual network: exact mean kernel", PAPER)
    dom = {K: Input(K, "[0, inf)", "kernel K^(l)"), K0: Input(K0, "[0, inf)", "input kernel K^(0)"),
           rho: Input(rho, "[0, inf)", "residual branch scale rho"),
           sigma_w2: Input(sigma_w2, "(0, inf)", "weight variance sigma_w^2"),
           sigma_b2: Input(sigma_b2, "[0, inf)", "bias variance sigma_b^2"),
           depth: Input(depth, "[0, inf)", "number of residual blocks L")}
    add = dv.adder(dom)
    add("kernel_update", kernel_update(), [K, rho, sigma_w2, sigma_b2], "1",
        "K^(l+1) = (1 + rho^2 sigma_w^2) K^(l) + rho^2 sigma_b^2", "K_{l+1}", "recursion")
    add("kernel_at_depth", kernel_closed_form(), [K0, rho, sigma_w2, sigma_b2, depth], "2",
        "K^(L) in closed form", "K_{L}")
    return dv
