"""Report claims of the schoenholz theory, declared once (:class:`resprop.numeric.report.claims.Claim`).

``CLAIMS`` is the list the report renders (``resprop reproduce schoenholz``) and the tests evaluate;
``claims(quick, step, figures_dir=None)`` returns ``(rows, extra)``, ``extra`` carrying the data of the figure.

Every claim compares the driver (root finding on the generated kernels: tanh's call the engine's quadrature) with an
independent route: mpmath quadrature at 30 digits (:mod:`resprop_schoenholz.mp_checks`), a 2-D Gauss--Hermite
product rule, the derivation's near-critical series, the paper's number, or random finite-width networks with
explicit weights (:mod:`resprop_schoenholz.network`).
"""
from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np

from resprop.numeric.report.claims import Claim, Criterion, Evidence, Tolerance, evaluate_claims, mc, ref, size

#: the chaotic tanh point of the fixed-point claims (c* < 1 there) and of the Monte Carlo
POINT: dict[str, Any] = dict(activation="tanh", sigma_w2=2.5, sigma_b2=0.05)
#: the paper's tanh critical point: sigma_b^2 = 0.05 -> sigma_w^2 = 1.761 (three decimals)
PAPER_SIGMA_B2, PAPER_SIGMA_W2, PAPER_DECIMALS = 0.05, 1.761, 3
#: relative offsets |sigma_w^2 - sigma_c^2| / sigma_c^2 of the divergence fit, on each side of the critical point
OFFSETS = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2)
#: |fitted exponent + 1| allowed: the next-order terms, xi_c = 1/(A delta) - 1/2 + O(delta) with chi_c - 1 = O(delta),
#: change the local log-log slope by O(A delta) <= about 1% at the largest offset (A delta ~ 1 - chi_c ~ 0.004)
EXPONENT_TOL = 0.01
#: agreement required of the driver with mpmath / the product rule (relative): both are near machine precision
MP_RTOL = 1e-10
#: the Monte Carlo: two inputs of q^(0) = 1 and correlation 0.6, through DEPTH layers of width N
MC_INPUT = dict(input_kernel=1.0, input_correlation=0.6)
DEPTH = 6
#: Monte Carlo sizes (quick, full)
SIZES = {"width": (128, 256), "networks": (64, 512)}


def _quick_size(name: str, quick: bool) -> int:
    return size(SIZES, name, quick)


def _rel(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-300)


@cache
def _point() -> Any:
    from resprop_schoenholz.driver import depth_scales

    return depth_scales(**POINT)


@cache
def _mp_point() -> dict:
    from resprop_schoenholz import mp_checks as M

    a, sw, sb = POINT["activation"], POINT["sigma_w2"], POINT["sigma_b2"]
    q = M.length_fixed_point(a, sw, sb)
    return {"q_star": q, "chi_1": M.chi_1(a, sw, q), "chi_q": M.chi_q(a, sw, q)}


def _q_star(ctx) -> Evidence:
    th, ref_q = _point(), float(_mp_point()["q_star"])
    err = _rel(th.q_star, ref_q)
    return Evidence(th.q_star, ref(ref_q, "mpmath: quad at 30 digits, findroot (Anderson) on its own bracket"),
                    holds=err <= MP_RTOL, note=f"relative difference {err:.1e}")


def _slopes(ctx) -> Evidence:
    th, mp_ = _point(), _mp_point()
    xi_q_mp = float(-1 / np.log(float(mp_["chi_q"])))
    theory = {"chi_1": th.chi_1, "chi_q": th.chi_q, "xi_q": th.xi_q}
    reference = {"chi_1": float(mp_["chi_1"]), "chi_q": float(mp_["chi_q"]), "xi_q": xi_q_mp}
    err = max(_rel(theory[k], reference[k]) for k in theory)
    return Evidence(theory, ref(reference, "mpmath: sigma_w^2 <phi'^2>, sigma_w^2 <phi'^2 + phi'' phi> at q* by quad "
                                           "(30 digits); xi_q = -1/log chi_q"),
                    holds=err <= MP_RTOL, note=f"largest relative difference {err:.1e}")


def _c_star(ctx) -> Evidence:
    from resprop_schoenholz.mp_checks import gauss_hermite_correlation

    th = _point()
    gh = gauss_hermite_correlation(POINT["activation"], POINT["sigma_w2"], POINT["sigma_b2"], th.q_star)
    xi_gh = float(-1 / np.log(gh["chi_c"]))
    theory = {"c_star": th.c_star, "chi_c": th.chi_c, "xi_c": th.xi_c}
    reference = {"c_star": gh["c_star"], "chi_c": gh["chi_c"], "xi_c": xi_gh}
    err = max(_rel(theory[k], reference[k]) for k in theory)
    return Evidence(theory, ref(reference, f"{gh['nodes']} x {gh['nodes']} Gauss-Hermite product rule "
                                           "(numpy.polynomial.hermite_e) at q*, c* by bisection"),
                    holds=err <= 1e-9 and th.phase == "chaotic", note=f"largest relative difference {err:.1e}")


@cache
def _critical() -> dict:
    from resprop_schoenholz import mp_checks as M
    from resprop_schoenholz.driver import critical_point

    th = critical_point("tanh", PAPER_SIGMA_B2)
    sw_mp, q_mp = M.critical_point("tanh", PAPER_SIGMA_B2)
    return {"theory": th, "sigma_w2_mp": float(sw_mp), "q_star_mp": float(q_mp)}


def _critical_point(ctx) -> Evidence:
    c = _critical()
    th = c["theory"]
    err = _rel(th.sigma_w2, c["sigma_w2_mp"])
    paper_gap = abs(th.sigma_w2 - PAPER_SIGMA_W2)
    half_unit = 0.5 * 10.0**-PAPER_DECIMALS
    return Evidence(th.sigma_w2, ref(c["sigma_w2_mp"], "mpmath: chi_1 = 1 and q* = sigma_w^2 <phi^2> + sigma_b^2 "
                                                         "solved at 30 digits"),
                    holds=err <= MP_RTOL and paper_gap <= half_unit,
                    note=f"q* = {th.q_star:.10g}; relative difference to mpmath {err:.1e}; |theory - paper| = "
                         f"{paper_gap:.1e} (the paper's {PAPER_DECIMALS} decimals: <= {half_unit:g})",
                    details={"q_star": th.q_star, "q_star_mpmath": c["q_star_mp"]})


@cache
def _divergence() -> dict:
    from resprop_schoenholz.driver import divergence_fit

    return divergence_fit("tanh", PAPER_SIGMA_B2, OFFSETS)


def _xi_divergence(ctx) -> Evidence:
    d = _divergence()
    slopes = {side: d[side]["slope"] for side in ("ordered", "chaotic")}
    ok = all(abs(s + 1.0) <= EXPONENT_TOL for s in slopes.values())
    return Evidence(slopes, ref(-1.0, "the derivation's series xi_c = 1/(1 - chi_c) - 1/2 + O(1 - chi_c) "
                                      "(xi_c_near_critical), chi_c linear in sigma_w^2 - sigma_c^2"),
                    holds=ok, note=f"sigma_c^2 = {d['sigma_c2']:.10g}; log-log least squares over "
                                   f"|sigma_w^2 - sigma_c^2| / sigma_c^2 = {', '.join(f'{o:g}' for o in OFFSETS)}",
                    details=d)


@cache
def _monte_carlo(quick: bool) -> dict:
    from resprop_schoenholz.driver import trajectory
    from resprop_schoenholz.network import first_order_bias, simulate

    a, sw, sb = POINT["activation"], POINT["sigma_w2"], POINT["sigma_b2"]
    width, networks = _quick_size("width", quick), _quick_size("networks", quick)
    tr = trajectory(a, sw, sb, depth=DEPTH, **MC_INPUT)
    sample = simulate(a, sw, sb, depth=DEPTH, width=width, networks=networks, seed=2017, **MC_INPUT)
    bias = first_order_bias(a, sw, sb, tr, sample)
    q = sample.length()
    q_mean, q_se = q.mean(axis=0), q.std(axis=0, ddof=1) / np.sqrt(networks)
    c_mean, c_se = sample.mean_se("c")
    return {"width": width, "networks": networks, "layer": tr.layer, "q_map": tr.q_aa, "c_map": tr.c,
            "q_mean": q_mean, "q_se": q_se, "c_mean": c_mean, "c_se": c_se, "q_bias": bias["q"],
            "c_bias": bias["c"]}


def _mc_evidence(quick: bool, key: str) -> Evidence:
    m = _monte_carlo(quick)
    mean, se, th, bias = m[f"{key}_mean"], m[f"{key}_se"], m[f"{key}_map"], m[f"{key}_bias"]
    allowance = 2 * np.abs(bias)
    z = (mean - th) / se
    method = (f"{m['networks']} random tanh networks of width {m['width']} (explicit weights, seed 2017), layer "
              f"{DEPTH} shown")
    return Evidence(float(th[-1]), mc(mean[-1], se[-1], method, max_abs_z=float(np.abs(z).max())),
                    compare=(mean, se, th, allowance),
                    note=f"largest |MC - map| / SE over the layers {np.abs(z).max():.2f}; allowance 2|b_l| up to "
                         f"{allowance.max():.2g}",
                    details={"layer": m["layer"], "map": th, "mc_mean": mean, "mc_se": se, "allowance": allowance})


def _mc_length(ctx) -> Evidence:
    return _mc_evidence(ctx.quick, "q")


def _mc_correlation(ctx) -> Evidence:
    return _mc_evidence(ctx.quick, "c")


_FINITE_WIDTH = ("b_l: the first-order (1/N) finite-width bias of the mean by the delta method, from the covariance "
                 "measured across the networks; twice it covers the O(1/N^2) rest")

CLAIMS = [
    Claim("schoenholz", "q-star", "q* (tanh, sigma_w^2 = 2.5, sigma_b^2 = 0.05): Brent on the generated length map",
          "q* = sigma_w^2 <phi(z)^2>_{q*} + sigma_b^2 (Sec. 2)",
          Criterion(f"relative difference to mpmath <= {MP_RTOL:g}"), _q_star),
    Claim("schoenholz", "slopes", "chi_1, chi_q and xi_q at q* (tanh, sigma_w^2 = 2.5, sigma_b^2 = 0.05)",
          "chi_1 = sigma_w^2 <phi'^2>; xi_q^-1 = -log(chi_1 + sigma_w^2 <phi'' phi>) (Secs. 2, 3)",
          Criterion(f"each relative difference to mpmath <= {MP_RTOL:g}"), _slopes),
    Claim("schoenholz", "c-star", "c*, chi_c and xi_c in the chaotic phase (tanh, sigma_w^2 = 2.5, sigma_b^2 = 0.05)",
          "c* < 1 above the critical line; xi_c^-1 = -log(sigma_w^2 <phi'(u_a) phi'(u_b)>) (Sec. 3)",
          Criterion("each relative difference to the product rule <= 1e-9, and the point is chaotic"), _c_star),
    Claim("schoenholz", "critical-point", "critical sigma_w^2 at sigma_b^2 = 0.05 (tanh, chi_1 = 1)",
          PAPER_SIGMA_W2,
          Criterion(f"relative difference to mpmath <= {MP_RTOL:g}, and within the paper's rounding "
                    f"(+-{0.5 * 10.0**-PAPER_DECIMALS:g})"), _critical_point),
    Claim("schoenholz", "xi-c-divergence",
          "exponent of xi_c ~ |sigma_w^2 - sigma_c^2|^p on each side of the critical point (tanh, sigma_b^2 = 0.05)",
          "xi_c diverges at the order-to-chaos transition, as |sigma_w^2 - sigma_c^2|^-1 (Sec. 3)",
          Criterion(f"|p + 1| <= {EXPONENT_TOL:g} on the ordered and on the chaotic side"), _xi_divergence),
    Claim("schoenholz", "mc-length", f"q^(l), l = 1..{DEPTH}: length map vs random tanh networks",
          "q^(l+1) = sigma_w^2 <phi^2>_{q^(l)} + sigma_b^2 at large width (Sec. 2)",
          Tolerance(k=4, allowance="2|b_l|", why=_FINITE_WIDTH, scope="every layer"), _mc_length),
    Claim("schoenholz", "mc-correlation", f"c^(l), l = 1..{DEPTH}: covariance map vs random tanh networks",
          "c^(l+1) from sigma_w^2 <phi(u_a) phi(u_b)> + sigma_b^2 at large width (Sec. 2)",
          Tolerance(k=4, allowance="2|b_l|", why=_FINITE_WIDTH, scope="every layer"), _mc_correlation),
]


def claims(quick, step, figures_dir=None):
    """The rows of ``CLAIMS`` and, for the figure, the divergence fit (``extra["divergence"]``)."""
    rows = evaluate_claims(CLAIMS, quick, step, figures_dir)
    return rows, {"divergence": _divergence()}
