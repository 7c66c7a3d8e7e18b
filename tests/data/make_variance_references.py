"""Make tests/data/variance_references.json: mpmath references (30 digits) for tests/test_variance_accuracy.py.

Run from the repository root:  python tests/data/make_variance_references.py  (~15 min on one core; ``--full``
computes the whole 2-D grid, ~2-3 h: the 2-D mpmath quadrature costs 15-90 s a point; ``--tables`` adds the
references of tests/test_large_variance_tables.py, see `table_rows`, ~20 min).

Independent of the code under test (resprop's graded float64 rules): everything here is mpmath.
* 1-D E[f(u)], u ~ N(0, K): mp.quad (tanh-sinh, adaptive, its own error estimate) with breakpoints at 0,
  +-k sqrt(K) (k = 1.5, 3, 6, 10) and at +-1, 2, 5, 10, 20, 40 inside the range.
* 2-D E[f(u) g(v)]: the conditional reduction written out in mpmath, E_u[f(u) E[g(v) | u]], each 1-D integral by
  a fixed 12-point Gauss--Legendre rule (30-digit nodes) on panels with edges mu + k sigma (k = -9..9, range
  +-9.5 sigma), 0 and +-2^j (j = -6..17) -- steps of one sigma and powers of two, not the library's edges.  A
  second pass with 24 points per panel on a subset checks the rule (the difference is written as ``check``).
* sin(x)^2: exact Fourier formulas (sin^2 x = (1 - cos 2x) / 2, E[cos(a u + b v)] = exp(-(a^2 K_aa + 2ab K_ab +
  b^2 K_bb) / 2)) evaluated at 60 digits (no quadrature).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import mpmath as mp

mp.mp.dps = 30
VARIANCES_1D = [10.0 ** (k / 2) for k in range(-16, 17)]          # 1e-8 .. 1e8, half decades (33)
VARIANCES_2D = [10.0 ** k for k in range(-8, 9, 2)]                # 1e-8 .. 1e8, two decades (9)
#: (K_bb / K_aa, rho)
CORRELATIONS = [(1.0, 0.0), (1.0, 0.5), (1.0, 0.99), (1.0, -0.9), (2.0, 0.7)]
ACTIVATIONS = {
    "tanh": (lambda x: mp.tanh(x), lambda x: mp.sech(x) ** 2),
    "log(1+exp(x))": (lambda x: mp.log1p(mp.exp(x)), lambda x: 1 / (1 + mp.exp(-x))),
    "x/(1+exp(-x))": (lambda x: x / (1 + mp.exp(-x)),
                      lambda x: 1 / (1 + mp.exp(-x)) + x * mp.exp(-x) / (1 + mp.exp(-x)) ** 2),
    "atan(x)": (lambda x: mp.atan(x), lambda x: 1 / (1 + x * x)),
}
FEATURES = (1, 2, 5, 10, 20, 40)


def quad1(f, K):
    s = mp.sqrt(mp.mpf(K))
    pts = {mp.mpf(0)} | {k * s for k in (-10, -6, -3, -1.5, 1.5, 3, 6, 10)}
    pts |= {mp.mpf(t) for t in FEATURES + tuple(-t for t in FEATURES) if abs(t) < 10 * s}
    return mp.quad(lambda u: f(u) * mp.npdf(u, 0, s), sorted(pts))


_GL: dict[int, list] = {}


def gl(n):
    if n not in _GL:
        _GL[n] = [(x, w) for x, w in mp.calculus.quadrature.GaussLegendre(mp.mp).calc_nodes(
            {12: 3, 24: 4}[n], mp.mp.prec)]
    return _GL[n]


def rule(mu, sigma, n):
    lo, hi = mu - 9.5 * sigma, mu + 9.5 * sigma
    edges = {lo, hi, mp.mpf(0)} | {mu + k * sigma for k in range(-9, 10)}
    edges |= {sgn * mp.mpf(2) ** j for j in range(-6, 18) for sgn in (1, -1)}
    edges = sorted(e for e in edges if lo <= e <= hi)
    out = []
    for a, b in zip(edges[:-1], edges[1:]):
        m, h = (a + b) / 2, (b - a) / 2
        for x, w in gl(n):
            u = m + h * x
            out.append((u, h * w * mp.npdf(u, mu, sigma)))
    return out


def quad2(f, g, Ka, Kb, Kab, n=12):
    Ka, Kb, Kab = mp.mpf(Ka), mp.mpf(Kb), mp.mpf(Kab)
    c = Kab / Ka
    s = mp.sqrt(Kb - c * Kab)
    total = mp.mpf(0)
    for u, w in rule(mp.mpf(0), mp.sqrt(Ka), n):
        inner = mp.fsum(g(v) * wv for v, wv in rule(c * u, s, n))
        total += w * f(u) * inner
    return total


def sin2(Ka, Kb, Kab):
    """(E sin^2 u sin^2 v, E sin 2u sin 2v) exactly (60 digits)."""
    with mp.workdps(60):
        Ka, Kb, Kab = mp.mpf(Ka), mp.mpf(Kb), mp.mpf(Kab)
        ca, cb = mp.exp(-2 * Ka), mp.exp(-2 * Kb)
        plus, minus = mp.exp(-2 * (Ka + Kb + 2 * Kab)), mp.exp(-2 * (Ka + Kb - 2 * Kab))
        ff = mp.mpf(1) / 4 - ca / 4 - cb / 4 + (plus + minus) / 8
        gg = (minus - plus) / 2
        return ff, gg


def eta() -> str:
    """sigma_w2 E[tanh'(u) tanh'(v)] at K = [[50, 30], [30, 50]] (resprop response's eta_offdiag example)."""
    f = ACTIVATIONS["tanh"][1]
    return mp.nstr(quad2(f, f, 50.0, 50.0, 30.0), 25)


#: table references (tests/test_large_variance_tables.py): (activation, d, rho) at equal variances d
TABLE_VARIANCES = (1e-4, 1.0, 30.0)
TABLE_NEAR_ONE = 1e-6          # rho = 1 - 1e-6 and rho = -(1 - 1e-6)
TABLE_2D = [(name, d, rho) for name in ("tanh", "atan(x)") for d in (1.0, 30.0) for rho in (0.5, -0.9)] + \
    [(name, 30.0, rho) for name in ("log(1+exp(x))", "x/(1+exp(-x))") for rho in (0.5, -0.9)]


def _derivatives(name: str, n: int):
    """phi, phi', ..., phi^(n) as mpmath callables (SymPy differentiates the expression)."""
    import sympy as sp

    xs = sp.Symbol("x", real=True)
    e = sp.sympify({"tanh": "tanh(x)"}.get(name, name), locals={"x": xs})
    return [sp.lambdify(xs, sp.diff(e, xs, k), "mpmath") for k in range(n + 1)]


def table_rows(variances=TABLE_VARIANCES, two_d=None, check: bool = True) -> list:
    """E[phi(u) phi(v)], E[phi'(u) phi'(v)] at equal variances d:
    * rho = 0: (E phi)^2, (E phi')^2 (1-D mp.quad);
    * rho = +-(1 - delta): Price's theorem, d^n/dc^n E[phi(u) phi(v)] = E[phi^(n)(u) phi^(n)(v)], Taylor in
      c = rho d about c = +-d, where the n-th term is (-+delta d)^n / n! E[phi^(n)(u) phi^(n)(+-u)] (1-D mp.quad;
      delta d <= 1e-3 for d <= 1000, six terms: the first omitted one is <= 1e-19 there for the four activations);
    * rho = 0.5, -0.9 (TABLE_2D): the 2-D conditional rule quad2 (12 and 24 points per panel, the difference as
      ``check``)."""
    rows = []
    for name in ACTIVATIONS:
        ders = _derivatives(name, 7)
        for d in variances:
            ef, eg = quad1(ders[0], d), quad1(ders[1], d)
            rows.append({"activation": name, "d": d, "rho": 0.0, "phiphi": mp.nstr(ef * ef, 25),
                         "dphidphi": mp.nstr(eg * eg, 25), "method": "product of 1-D"})
            delta = mp.mpf(TABLE_NEAR_ONE)
            for sign in (1, -1):
                f = g = mp.mpf(0)
                for n in range(6):
                    c = (-sign * delta * d) ** n / mp.factorial(n)  # c - (+-d) = -+delta d
                    f += c * quad1(lambda u, n=n: ders[n](u) * ders[n](sign * u), d)
                    g += c * quad1(lambda u, n=n: ders[n + 1](u) * ders[n + 1](sign * u), d)
                rows.append({"activation": name, "d": d, "rho": float(sign * (1 - delta)),
                             "phiphi": mp.nstr(f, 25), "dphidphi": mp.nstr(g, 25),
                             "method": "Price-Taylor about rho = +-1"})
            print(name, d, "1-D rows done", flush=True)
    for name, d, rho in TABLE_2D if two_d is None else two_d:
        f, df = ACTIVATIONS[name]
        c = rho * d
        pp, dd = quad2(f, f, d, d, c), quad2(df, df, d, d, c)
        rows.append({"activation": name, "d": d, "rho": rho, "phiphi": mp.nstr(pp, 25),
                     "dphidphi": mp.nstr(dd, 25), "method": "2-D quad2"})
        if check:
            rows[-1]["check"] = mp.nstr(max(abs(quad2(f, f, d, d, c, 24) - pp), abs(quad2(df, df, d, d, c, 24) - dd)), 3)
        print(rows[-1], flush=True)
    return rows


def main() -> None:
    path = Path(__file__).with_name("variance_references.json")
    if "--tables" in sys.argv:  # add the table references to an existing file
        out = json.loads(path.read_text())
        out["tables"] = table_rows()
        path.write_text(json.dumps(out, indent=1) + "\n")
        return
    if "--tables-large" in sys.argv:  # the same at d = 1000 (1-D rows; 2-D at rho = +-0.99 for tanh and SiLU)
        rows = table_rows((1000.0,), [(name, 1000.0, rho) for name in ("tanh", "x/(1+exp(-x))")
                                      for rho in (0.99, -0.99)], False)
        out = json.loads(path.read_text())
        out["tables"] = [r for r in out.get("tables", []) if r["d"] != 1000.0] + rows
        path.write_text(json.dumps(out, indent=1) + "\n")
        return
    if "--eta-only" in sys.argv:  # add the response example to an existing file
        out = json.loads(path.read_text())
        out["eta_offdiag_tanh_50_30"] = eta()
        path.write_text(json.dumps(out, indent=1) + "\n")
        return
    out: dict = {"one": [], "two": []}
    full = "--full" in sys.argv
    for name, (f, df) in ACTIVATIONS.items():
        for K in VARIANCES_1D + [2 * k for k in VARIANCES_2D]:
            a, b = quad1(lambda u: f(u) ** 2, K), quad1(lambda u: df(u) ** 2, K)
            out["one"].append({"activation": name, "K": K, "phi2": mp.nstr(a, 25), "dphi2": mp.nstr(b, 25)})
        print(name, "1-D done", flush=True)
    for K in VARIANCES_1D + [2 * k for k in VARIANCES_2D]:
        with mp.workdps(60):
            a = mp.mpf(3) / 8 - mp.exp(-2 * mp.mpf(K)) / 2 + mp.exp(-8 * mp.mpf(K)) / 8
            b = (1 - mp.exp(-8 * mp.mpf(K))) / 2
        out["one"].append({"activation": "sin(x)**2", "K": K, "phi2": mp.nstr(a, 25), "dphi2": mp.nstr(b, 25)})
    for name, (f, df) in ACTIVATIONS.items():
        if not full and name not in ("tanh", "x/(1+exp(-x))"):
            continue
        for K in VARIANCES_2D if full else (1e-8, 1.0, 1e4, 1e8):
            for ratio, rho in CORRELATIONS:
                if rho == 0.0 or (not full and rho != 0.99):
                    continue  # the product of 1-D expectations: the test takes it from "one"
                Kb = ratio * K
                Kab = rho * (K * Kb) ** 0.5
                row = {"activation": name, "K_aa": K, "K_bb": Kb, "K_ab": Kab,
                       "phiphi": mp.nstr(quad2(f, f, K, Kb, Kab), 25),
                       "dphidphi": mp.nstr(quad2(df, df, K, Kb, Kab), 25)}
                if full and rho == 0.99 and K in (1e-4, 1.0, 1e4):
                    row["check"] = mp.nstr(abs(quad2(df, df, K, Kb, Kab, 24) - mp.mpf(row["dphidphi"])), 3)
                out["two"].append(row)
                print(row, flush=True)
    for K in VARIANCES_2D:
        for ratio, rho in CORRELATIONS:
            Kb = ratio * K
            Kab = rho * (K * Kb) ** 0.5
            ff, gg = sin2(K, Kb, Kab)
            out["two"].append({"activation": "sin(x)**2", "K_aa": K, "K_bb": Kb, "K_ab": Kab,
                               "phiphi": mp.nstr(ff, 25), "dphidphi": mp.nstr(gg, 25)})
    out["eta_offdiag_tanh_50_30"] = eta()
    path.write_text(json.dumps(out, indent=1) + "\n")
    print("wrote", path)


if __name__ == "__main__":
    main()
