"""Hypothesis strategies built from the parameter declarations (``resprop.derive.symbols.Parameter``).

Nothing here names a theory or a parameter: :func:`inside` draws values in a declaration's domain (closed ends
included, open ends excluded, integers for an integer parameter; a moderate range and the whole float64 range),
:func:`outside` values that the one validation layer must refuse (below or above the interval, NaN, +-inf,
non-numeric, and for an integer parameter non-integers and integers beyond int64), and :func:`kernel_inputs` a
full argument set of a generated kernel (a covariance ``K_ab`` drawn from its variances).
"""
from __future__ import annotations

import importlib
import math

import numpy as np
from hypothesis import strategies as st

from resprop.numeric.engine.validation import parse_domain
from resprop.registry import derivations

#: the values inside a domain are drawn from this moderate range half of the time (the rest: all of float64)
MODERATE = 1e3


def declarations(theory: str) -> dict:
    """name -> Parameter for the derivation ``theory``: its module's PARAMETERS (without running SymPy on it)."""
    module = importlib.import_module(derivations()[theory][0].partition(":")[0])
    out = {}
    for p in getattr(module, "PARAMETERS", ()):
        out.setdefault(p.name, p)
    return out


def _floats(lo, hi, lo_closed, hi_closed):
    return st.floats(min_value=lo, max_value=hi, exclude_min=not lo_closed and math.isfinite(lo),
                     exclude_max=not hi_closed and math.isfinite(hi), allow_nan=False, allow_infinity=False)


def inside(parameter) -> st.SearchStrategy:
    """Values in the declared domain (a covariance domain: any finite real; use :func:`kernel_inputs`)."""
    d = parse_domain(parameter.domain)
    if parameter.integer:
        lo = math.ceil(d.lo) if d.lo_closed else math.floor(d.lo) + 1
        hi = np.iinfo(np.int64).max if math.isinf(d.hi) else (math.floor(d.hi) if d.hi_closed else math.ceil(d.hi) - 1)
        return st.one_of(st.integers(lo, min(hi, lo + 1000)), st.integers(lo, hi))
    if d.kind != "interval":
        return st.floats(allow_nan=False, allow_infinity=False)
    lo, hi = max(d.lo, -MODERATE), min(d.hi, MODERATE)
    moderate = _floats(lo, hi, d.lo_closed or lo > d.lo, d.hi_closed or hi < d.hi)
    ends = [st.just(v) for v, closed in ((d.lo, d.lo_closed), (d.hi, d.hi_closed)) if closed]
    return st.one_of(moderate, _floats(d.lo, d.hi, d.lo_closed, d.hi_closed), *ends)


def outside(parameter, kernel: bool = False) -> st.SearchStrategy:
    """Values the declaration refuses.  For an integer parameter also non-integers and integers beyond int64,
    and booleans always -- except with ``kernel``: a generated kernel takes float64 arrays (a boolean array
    included, as NumPy does) and checks the interval only."""
    d = parse_domain(parameter.domain)
    integer = parameter.integer and not kernel
    bad = [st.sampled_from([math.nan, math.inf, -math.inf, "1", None, 1j] + ([] if kernel else [True]))]
    if d.kind == "interval":
        if math.isfinite(d.lo):
            below = st.floats(max_value=d.lo, exclude_max=d.lo_closed, allow_nan=False, allow_infinity=False)
            bad += [below, st.just(np.nextafter(d.lo, -math.inf) if d.lo_closed else d.lo)]
        if math.isfinite(d.hi):
            above = st.floats(min_value=d.hi, exclude_min=d.hi_closed, allow_nan=False, allow_infinity=False)
            bad += [above, st.just(np.nextafter(d.hi, math.inf) if d.hi_closed else d.hi)]
    if integer:
        start = d.lo if math.isfinite(d.lo) else 0.0
        bad += [st.just(start + 0.5), st.integers(2**63, 2**80), st.just(1e20)]
    return st.one_of(*bad)


def kernel_inputs(inputs: dict[str, str], declared: dict) -> st.SearchStrategy:
    """A dict of arguments for a generated kernel whose ``RESULTS`` entry lists ``inputs`` (name -> domain), each
    drawn inside its declaration; a covariance input is rho sqrt(var_a var_b) with rho in [-1, 1]."""
    plain = {n: inside(declared[n]) for n, dom in inputs.items() if parse_domain(dom).kind == "interval"
             or dom == "real"}
    covs = {n: parse_domain(dom) for n, dom in inputs.items() if n not in plain}

    @st.composite
    def draw(draw_):
        args = {n: draw_(s) for n, s in plain.items()}
        for n, d in covs.items():
            rho = draw_(st.floats(-1.0, 1.0))
            args[n] = rho * math.sqrt(float(args[d.var_a])) * math.sqrt(float(args[d.var_b]))
        return {n: args[n] for n in inputs}

    return draw()
