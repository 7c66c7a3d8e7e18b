"""Derivation of the example theory: the recursion and its closed form, solved by SymPy (rsolve).

Each input is declared once (:class:`resprop.derive.symbols.Parameter`): symbol and assumptions, domain, LaTeX
and meaning; the generated kernels validate the domains and the LaTeX export prints the declared symbols.
"""
import sympy as sp

from resprop.derive.results import Derivation
from resprop.derive.symbols import Parameter

PAPER = "example_linear"

PARAMETERS = (
    Parameter("K", "[0, inf)", "K", "kernel K^(l) = E[h . h] / width", layer=r"\ell"),
    Parameter("K_0", "[0, inf)", "K^{(0)}", "input kernel K^(0)"),
    Parameter("rho", "[0, inf)", r"\rho", "residual branch scale rho"),
    Parameter("sigma_w2", "(0, inf)", r"\sigma_{w}^{2}", "weight variance sigma_w^2"),
    Parameter("sigma_b2", "[0, inf)", r"\sigma_{b}^{2}", "bias variance sigma_b^2"),
    Parameter("depth", "[0, inf)", "L", "number of residual blocks L", integer=True),
)
K, K0, rho, sigma_w2, sigma_b2, depth = (p.symbol for p in PARAMETERS)


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
    dv.declare(PARAMETERS)
    add = dv.adder()
    add("kernel_update", kernel_update(), [K, rho, sigma_w2, sigma_b2], "1",
        "K^(l+1) = (1 + rho^2 sigma_w^2) K^(l) + rho^2 sigma_b^2", r"K^{(\ell+1)}", "recursion",
        statement="The mean kernel of a deep linear ResNet obeys, at every width, the affine recursion")
    add("kernel_at_depth", kernel_closed_form(), [K0, rho, sigma_w2, sigma_b2, depth], "2",
        "K^(L) in closed form", r"K^{(L)}",
        statement="Solving the recursion from the input kernel gives the kernel after L blocks in closed form")
    return dv
