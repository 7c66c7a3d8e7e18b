"""Activation functions as SymPy expressions in one variable ``x``.

Closed-form Gaussian kernels exist for ``erf``, ``relu`` and ``linear``
(see :mod:`resprop.derive.gaussian`); every other activation -- the built-in ``tanh``
and ``gelu`` or any SymPy expression a user supplies -- goes through the
generated Gauss--Hermite kernels and the mpmath route.
"""
from __future__ import annotations

import sympy as sp

x = sp.Symbol("x", real=True)

#: Smooth activations handled by generated Gauss--Hermite kernels.
BUILTIN_EXPRESSIONS: dict[str, sp.Expr] = {
    "erf": sp.erf(x),
    "tanh": sp.tanh(x),
    "gelu": x * (1 + sp.erf(x / sp.sqrt(2))) / 2,
    "silu": x / (1 + sp.exp(-x)),
    "linear": x,
    "relu": sp.Max(x, 0),
}

KNOWN = tuple(BUILTIN_EXPRESSIONS)


def activation_expr(name: str) -> sp.Expr:
    """The SymPy expression of a named activation; unknown names are an error."""
    try:
        return BUILTIN_EXPRESSIONS[name]
    except KeyError:
        raise ValueError(
            f"activation: unknown activation {name!r}; allowed: {', '.join(KNOWN)} "
            "(or pass a SymPy expression in x)"
        ) from None


def derivatives(expr: sp.Expr) -> tuple[sp.Expr, sp.Expr, sp.Expr]:
    """(phi, phi', phi'') by SymPy differentiation."""
    d1 = sp.diff(expr, x)
    return expr, sp.simplify(d1), sp.simplify(sp.diff(d1, x))
