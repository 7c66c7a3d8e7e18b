"""abcd parameterisations of linear BP and PC networks (Innocenti, Achour & Bogacz 2025), numeric/CLI layer.

Exact answers come from ``resprop.derive.theories.abcd`` (case analysis + linsolve + rational Fourier--Motzkin,
cross-checked
with linprog); this module turns them into JSON-ready dictionaries, parses ``key=value`` assignments with
exact rationals, evaluates the generated rate kernels, and measures the PC-specific terms by Monte Carlo.

Assignment keys (the paper's notation, §2.2 and Table 1): ``a1``, ``b1`` (first layer), ``a``, ``b`` (every
layer l = 2..L, output included: the paper's Table 2 and eq. 15 use one a_l, b_l for l in {2, ..., L}; the
aliases ``a_l``/``aL``/``a_L`` and ``b_l``/``bL``/``b_L`` name the same exponent and must agree), ``c``, ``d``;
optionally ``alpha`` (residual-branch exponent, adds Desiderata 4 and 5) and ``nu`` (width-to-depth exponent,
N = L^nu, > 0; only PC's Desideratum 5 depends on it; default: the width limit first, N >> L).
Values are exact rationals: ``1/2``, ``0.5``, ``-1``, ``2.5e-1``.

Depth: the public ``depth`` (``rates``, ``cli_abcd``, ``resprop abcd --depth``) follows resprop's one convention
(docs/api-renames.md): the number of residual (hidden) layers after the read-in, the readout not counted, so
``depth = L - 2 >= 0`` where L is the paper's number of weight matrices (read-in W^(1), L - 2 hidden or residual
layers l = 2..L-1, readout W^(L); eqs. 7-10 and 18).  The derivations and generated kernels stay in the paper's L
(eqs. 72, 93, 124 are written in it); the conversion L = depth + 2 happens here.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cache

import numpy as np

from resprop.numeric.engine import validation as V
from resprop.numeric.engine.results import ResultRecord
from resprop.numeric.engine.validation import ParameterError, integer, positive

REQUIRED = ("a1", "b1", "a", "b", "c", "d")
OPTIONAL = ("alpha", "nu")
ALIASES = {
    "a1": "a1", "a_1": "a1", "b1": "b1", "b_1": "b1",
    "a": "a", "a_l": "a", "al": "a", "aL": "a", "a_L": "a",
    "b": "b", "b_l": "b", "bl": "b", "bL": "b", "b_L": "b",
    "c": "c", "d": "d", "alpha": "alpha", "nu": "nu",
}
DESCRIPTIONS = {
    "a1": "first-layer preactivation exponent a_1 (h^(1) = N^-a_1 W^(1) x / sqrt(D))",
    "b1": "first-layer init-variance exponent b_1 (W^(1)_ij ~ N(0, N^-b_1))",
    "a": "preactivation exponent a_l of layers l = 2..L (hidden and output)",
    "b": "init-variance exponent b_l of layers l = 2..L",
    "c": "learning-rate exponent c (eta = eta_0 gamma^2 N^-c)",
    "d": "output exponent d (gamma = gamma_0 N^d)",
    "alpha": "residual-branch exponent alpha (h^(l) = (I + L^-alpha N^-1/2 W^(l)) h^(l-1))",
    "nu": "width-to-depth exponent nu (N = L^nu); PC's Desideratum 5 only",
}


# --------------------------------------------------------------------------- parsing
def _rational(key: str, text: str) -> Fraction:
    text = text.strip()
    try:
        value = Fraction(text)
    except (ValueError, ZeroDivisionError):
        raise ParameterError(key, f"must be a finite rational number such as 1/2, 0.5 or -1, got {text!r}") from None
    return value


def parse_assignments(assignments: Iterable[str]) -> dict[str, Fraction]:
    """``["a1=0", "b1=0", "a=1/2", ...]`` -> {"a1": Fraction(0), ...}, exact; every error names the parameter."""
    if isinstance(assignments, str):
        assignments = assignments.split()
    if assignments is None or not isinstance(assignments, Iterable):
        raise ParameterError("assignments (--check)", f"must be a list of key=value strings (e.g. ['a1=0', 'd=1/2']), "
                                           f"got {assignments!r}")
    out: dict[str, Fraction] = {}
    given_as: dict[str, str] = {}
    for item in assignments:
        if not isinstance(item, str) or "=" not in item:
            raise ParameterError("assignments (--check)", f"must look like key=value (e.g. a1=0, d=1/2), got {item!r}")
        key, text = (s.strip() for s in item.split("=", 1))
        if key not in ALIASES:
            raise ParameterError(key or "assignments (--check)", f"unknown exponent {key!r}; allowed: "
                                 f"{', '.join(REQUIRED + OPTIONAL)} (aliases: a_1, b_1, a_l, aL, b_l, bL)")
        canon = ALIASES[key]
        value = _rational(canon, text)
        if canon in out and out[canon] != value:
            raise ParameterError(canon, f"inconsistent assignments: {given_as[canon]}={out[canon]} and "
                                 f"{key}={value} (the paper uses one a_l, b_l for every layer l = 2..L)")
        out[canon] = value
        given_as[canon] = key
    missing = [k for k in REQUIRED if k not in out]
    if missing:
        raise ParameterError(missing[0], f"missing exponent(s) {', '.join(missing)}; required: {' '.join(REQUIRED)}")
    if "nu" in out and out["nu"] <= 0:
        raise ParameterError("nu", f"must be > 0 (N = L^nu, allowed range (0, inf)), got {out['nu']}")
    if "nu" in out and "alpha" not in out:
        raise ParameterError("nu", "only enters Desideratum 5: give alpha as well")
    return out


def _as_params(values: dict[str, Fraction]) -> tuple[dict, Fraction | None, Fraction | None]:
    return {k: values[k] for k in REQUIRED}, values.get("alpha"), values.get("nu")


# --------------------------------------------------------------------------- results
@dataclass(frozen=True)
class Verdicts(ResultRecord):
    """:func:`check`: per algorithm, desideratum number (as a string) -> holds."""

    bp: dict[str, bool]
    pc: dict[str, bool]


@dataclass(frozen=True)
class CheckDetails(ResultRecord):
    """:func:`check_details`: the exact and the linprog verdicts, every term's exponent, the parsed parameters."""

    verdicts: Verdicts
    lp_verdicts: Verdicts
    exponents: dict
    parameters: dict[str, str]


@dataclass(frozen=True)
class SolutionFamily(ResultRecord):
    """:func:`solution_family`: the eq.-15 family, the depth results, PC rates and all pieces per reading."""

    paper: str
    variables: dict[str, str]
    family: dict[str, str]
    eq15: dict[str, bool]
    same_for_bp_and_pc: bool
    depth: dict[str, str]
    pc_rates: dict
    readings: dict
    notes: list[str]


@dataclass(frozen=True)
class Table2(ResultRecord):
    """:func:`table2`: per parameterisation its exponents and verdicts; depth verdicts on mean-field."""

    parameterisations: dict
    depth_on_mean_field: dict
    discrepancy: str


@dataclass(frozen=True)
class PCRates(ResultRecord):
    """:func:`rates`: the PC rate r, the D-term and the alpha = 1/2 depth term per width, with log-log slopes
    in the width (None for fewer than two distinct widths).  ``depth`` is resprop's depth (residual layers between
    read-in and readout), ``L = depth + 2`` the paper's number of weight matrices the rates are written in."""

    width: np.ndarray
    depth: int
    L: int
    gamma0: float
    r: np.ndarray
    D: np.ndarray
    depth_term_alpha_half: np.ndarray
    slope_r: float | None = None
    slope_D: float | None = None


@dataclass(frozen=True)
class PCTerms(ResultRecord):
    """:func:`mlp_pc_terms`: per width the rms |q|, |r|, D-term, BP feature term, s - 1 and |f|; ``slopes``
    (log-log in the width, per term) for at least two distinct widths (None otherwise)."""

    width: np.ndarray
    q: np.ndarray
    r: np.ndarray
    D: np.ndarray
    bp_feature: np.ndarray
    s_minus_1: np.ndarray
    f: np.ndarray
    slopes: dict[str, float] | None = None


def _verdicts(verdicts: dict) -> Verdicts:
    return Verdicts(**_strkeys(verdicts))


# --------------------------------------------------------------------------- classification
def _strkeys(verdicts: dict) -> dict:
    return {alg: {str(k): bool(v) for k, v in ds.items()} for alg, ds in verdicts.items()}


def check(assignments: Iterable[str], reading: str = "paper") -> Verdicts:
    """``bp``, ``pc``: {"1": bool, ...}: Desiderata 1-3 (and 4-5 when alpha is given), decided exactly."""
    from resprop.derive.theories import abcd as A
    if reading not in A.READINGS:
        raise ParameterError("reading", f"unknown value {reading!r}; allowed: {', '.join(A.READINGS)}")
    params, alpha, nu = _as_params(parse_assignments(assignments))
    return _verdicts(A.classify(params, alpha, nu, reading=reading))


def check_details(assignments: Iterable[str], reading: str = "paper") -> CheckDetails:
    """``check`` plus the exponent of every power-counting term and the linprog verdicts."""
    from resprop.derive.theories import abcd as A
    params, alpha, nu = _as_params(parse_assignments(assignments))
    return CheckDetails(verdicts=check(assignments, reading),
                        lp_verdicts=_verdicts(A.lp_classify(params, alpha, nu, reading=reading)),
                        exponents=A.term_exponents(params, alpha, nu),
                        parameters={k: str(v) for k, v in parse_assignments(assignments).items()})


# --------------------------------------------------------------------------- solution family
def _pieces(alg: str, reading: str, numbers: tuple[int, ...]) -> list[dict]:
    from resprop.derive.theories import abcd as A
    return [p.describe() for p in A.solution(alg, reading, numbers)]


@cache
def _solution_family() -> SolutionFamily:
    import sympy as sp

    from resprop.derive.theories import abcd as A
    fam = A.eq15_family("pc")
    names = {A.a1: "a1", A.b1: "b1", A.a: "a", A.b: "b", A.c: "c", A.d: "d"}
    eq15 = [sp.Eq(2 * A.a + A.b, 1), sp.Eq(2 * A.a1 + A.b1, 0), sp.Eq(2 * A.a + A.c, 1), sp.Eq(2 * A.a1 + A.c, 0),
            sp.Eq(A.d, sp.Rational(1, 2))]
    on_family = {rel: bool(rel.xreplace(fam)) for rel in eq15}
    branch = {sp.Max(0, -2 * A.d): 0}
    pcw = A.width_terms("pc")
    rate = {k: str(pcw[k].exponent.xreplace(branch).xreplace(fam)) for k in ("r_hidden", "D_hidden")}
    sharp = {st: {k: str(v.xreplace(fam)) for k, v in A.sharp_pc_exponents(st).items()} for st in ("init", "aligned")}
    readings = {}
    for reading in A.READINGS:
        readings[reading] = {alg: {
            "width_D1_D2_D3": _pieces(alg, reading, A.WIDTH_DESIDERATA),
            "depth_D4_D5": _pieces(alg, reading, A.DEPTH_DESIDERATA),
            "each": {str(k): _pieces(alg, reading, (k,)) for k in A.WIDTH_DESIDERATA + A.DEPTH_DESIDERATA},
        } for alg in A.ALGORITHMS}
    (d4,) = A.solution("bp", "paper", (4,))
    (d5,) = A.solution("bp", "paper", (5,))
    (pc45,) = A.solution("pc", "paper", A.DEPTH_DESIDERATA)
    return SolutionFamily(
        paper="Innocenti, Achour & Bogacz (2025), On the infinite width and depth limits of predictive coding "
              "networks",
        variables=dict(DESCRIPTIONS),
        family={"free": "c", **{names[k]: str(v) for k, v in fam.items()}},
        eq15={str(rel): ok for rel, ok in on_family.items()},
        same_for_bp_and_pc=A.eq15_family("bp") == fam,
        depth={
            "D4": str(d4.inequalities[0]),
            "D5": f"alpha = {d5.solution[A.alpha]}",
            "pc_D4_and_D5": f"alpha = {pc45.solution[A.alpha]} for {' and '.join(map(str, pc45.inequalities))} "
                            "(N = L^nu; for nu < 1 no alpha meets both)",
        },
        pc_rates={
            "r_exponent_on_family": rate["r_hidden"], "D_exponent_on_family": rate["D_hidden"],
            "sharp_exponents_on_family": sharp,
            "s_minus_1": "L/(gamma_0^2 N^(2d)) = Theta(L/N) on the family (eqs. 47, 107)",
            "depth_term_at_alpha_half": "L/N^2 / (1 + L/N)^2 = Theta(L/N^2) for N >> L (eq. 123, s from eq. 107)",
        },
        readings=readings,
        notes=[
            "paper reading: every layer's own update must act at order one (eqs. 66-67, 83, 89-90, 124)",
            "literal reading: the desideratum's total quantity must be Theta(1) (propagated updates count)",
            "PC-specific exponents use the paper's counting (coherent sums): upper bounds; see sharp_exponents",
        ],
    )


def solution_family() -> SolutionFamily:
    """The exact solution family (eq. 15, d = 1/2), the depth results, PC rates and all pieces per reading."""
    return _solution_family()


def table2() -> Table2:
    """Table 2 (SP, NTK, mean-field, muP): exponents and the classification for BP and PC, per desideratum."""
    from resprop.derive.theories import abcd as A
    rows = {}
    for name, params in A.TABLE2.items():
        ours = A.classify(params)
        paper = A.TABLE2_PAPER_CLAIMS[name]
        rows[name] = {
            "exponents": {k: str(v) for k, v in params.items()},
            "bp": _strkeys(ours)["bp"],
            "pc": _strkeys(ours)["pc"],
            "literal_reading": _strkeys(A.classify(params, reading="literal")),
            "paper_section_2_3": {str(k): v for k, v in paper.items()},
            "agrees_with_paper": all(ours[alg][k] == paper[k] for alg in A.ALGORITHMS for k in paper),
            "term_exponents": A.term_exponents(params),
        }
    mf = A.TABLE2["mean-field"]
    half = Fraction(1, 2)
    depth = {f"alpha={al}": _strkeys(A.classify(mf, al)) for al in (Fraction(0), half, Fraction(1))}
    depth["alpha=1/2, nu=1/2 (L = N^2)"] = _strkeys(A.classify(mf, half, half))
    return Table2(parameterisations=rows, depth_on_mean_field=depth,
                  discrepancy="SP: the paper (§2.3) says SP has evolving features; with Table 2's c = d = 0 the "
                              "hidden features move as N^(1/2) and the first layer's as N^(-1/2), so Desideratum 3 "
                              "fails")


# --------------------------------------------------------------------------- generated kernels
def _widths(widths) -> np.ndarray:
    try:
        arr = np.asarray(widths, dtype=float)
    except (TypeError, ValueError):
        raise ParameterError("widths (N)", f"must be numeric widths >= 1, got {widths!r}") from None
    if arr.size == 0:
        raise ParameterError("widths (N)", "needs at least one width")
    if not np.isfinite(arr).all():
        raise ParameterError("widths (N)", "must be finite widths >= 1")
    if (arr < 1).any():
        raise ParameterError("widths (N)", f"must be >= 1 (allowed range [1, inf)), got {arr[arr < 1].tolist()[:4]}")
    if (arr > MAX_WIDTH).any():
        raise ParameterError(
            "widths (N)", f"must be <= {MAX_WIDTH:g} (the rates use N^2), got {arr[arr > MAX_WIDTH].tolist()[:4]}"
        )
    return arr.reshape(-1)


MAX_WIDTH = 1e100


def rates(widths: Sequence[float], depth: int = 1, gamma0: float = 1.0) -> PCRates:
    """PC-specific terms on the eq.-15 family from the generated kernels, and their fitted log-log slopes.

    ``depth`` (>= 0, default 1) is the number of residual (hidden) layers between the read-in and the readout;
    the paper's L (number of weight matrices, in which eq. 72's r = L^2 gamma_0^2 N^(3/2)/(N + 1)^2 and eq. 124's
    depth term (L/N^2)/(1 + L/N)^2 are written) is L = depth + 2.  (Before the depth convention ``depth`` was L:
    ``rates(w, depth=L)`` is now ``rates(w, depth=L - 2)``, same numbers.)
    """
    import resprop.numeric.theories.abcd.generated.abcd as G

    N = _widths(widths)
    depth = integer("depth", depth, minimum=0, maximum=2**53 - 2)
    L_int = depth + 2  # the paper's L: read-in, depth hidden/residual layers, readout
    L = np.float64(L_int)
    g0 = float(positive("gamma0", gamma0))
    with np.errstate(over="ignore"):
        r = G.pc_r_scale.unchecked(N, L, np.float64(g0))  # type: ignore[attr-defined]  # validated above; overflow named below
    V.finite_result("gamma0, depth", r, "the PC rate r = L^2 gamma0^2 N^(3/2)/(N + 1)^2 (L = depth + 2)")
    if np.any(r == 0):
        raise ParameterError("gamma0, depth", "the PC rate r = L^2 gamma0^2 N^(3/2)/(N + 1)^2 (L = depth + 2) "
                                              "underflows to 0 in float64; use gamma0 of moderate size")
    D = G.pc_D_scale(N)
    depth_term = G.pc_depth_term_alpha_half(N, L)
    slopes = N.size >= 2 and np.unique(N).size >= 2
    return PCRates(width=N, depth=depth, L=L_int, gamma0=g0, r=r, D=D, depth_term_alpha_half=depth_term,
                   slope_r=loglog_slope(N, r) if slopes else None, slope_D=loglog_slope(N, D) if slopes else None)


def loglog_slope(x, y) -> float:
    x, y = np.asarray(x, float), np.abs(np.asarray(y, float))
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])


# --------------------------------------------------------------------------- Monte Carlo
MEAN_FIELD = {"a1": 0.0, "b1": 0.0, "a": 0.5, "b": 0.0, "c": 0.0, "d": 0.5}


def mlp_pc_terms(widths: Sequence[int], params: dict | None = None, seeds: int = 4, samples: int = 20,
                 input_dim: int = 40, target: float = 3.0, aligned: bool = False, seed: int = 0) -> PCTerms:
    """|q|, |r|, the D-term and the BP feature term of a linear MLP with L = 3 weight matrices (depth 1: one hidden
    N x N layer after the read-in) under (a1, b1, a, b, c, d), by Monte Carlo.

    gamma_0 = eta_0 = 1, weights W^(1) (N x D), W^(2) (N x N), w^(3) (N), and ``samples`` inputs (default
    P = 20 in D = 40 dimensions, the paper's toy task, A.8), each treated
    as its own one-sample problem (MSE loss 1/2 (y - f)^2) so that one weight draw gives many estimates.  With
    s = 1 + gamma^-2 (N^-2a ||w3||^2 + N^-4a ||w3 W2||^2) (eq. 25), returned per width (root mean square over
    seeds x samples): q and r of eq. 58, the D-term N^-a D^(2) h^(1) (eq. 89, rms entry), the BP term
    N^-a dW^(2)/dt h^(1) (rms entry), s - 1 and |f|.  ``aligned`` adds to w^(3) the component
    g N^a P sum_mu h^(2)_mu / ||H^(2)||_F^2, which has Theta(1) entries and moves every f_mu by Theta(1): the state
    reached once the readout has learned (h^(L) ~ gamma).
    """
    p = dict(MEAN_FIELD if params is None else {k: float(v) for k, v in params.items()})
    for k in REQUIRED:
        if k not in p:
            raise ParameterError(k, "missing exponent")
    ws = [integer("N", w, minimum=1) for w in np.atleast_1d(widths)]
    seeds = integer("seeds", seeds, minimum=1)
    P = integer("samples", samples, minimum=1)
    input_dim = integer("input_dim", input_dim, minimum=1)
    a1, b1, a, b, c, d = (p[k] for k in REQUIRED)
    Dn = input_dim
    rows = []
    for n in ws:
        acc = []
        for rep in range(seeds):
            rng = np.random.default_rng([seed, n, rep])
            X = rng.standard_normal((Dn, P))
            W1 = rng.standard_normal((n, Dn)) * n ** (-b1 / 2)
            W2 = rng.standard_normal((n, n)) * n ** (-b / 2)
            w3 = rng.standard_normal(n) * n ** (-b / 2)
            g = n**d
            eta = g**2 * n ** (-c)
            H1 = W1 @ X / (n**a1 * np.sqrt(Dn))  # N x P
            H2 = W2 @ H1 / n**a
            if aligned:
                w3 = w3 + g * n**a * H2.sum(axis=1) * P / np.sum(H2**2)
            f = (w3 @ H2 / n**a) / g
            delta = target - f
            loss = 0.5 * delta**2
            p2 = w3 @ W2
            s = 1 + g**-2 * (n ** (-2 * a) * (w3 @ w3) + n ** (-4 * a) * (p2 @ p2))
            u1 = (W2.T @ w3) / n ** (2 * a)
            # NTK_f(mu, mu) = |df/dw3|^2 + |df/dW2|^2 + |df/dW1|^2
            ntk = (np.sum(H2**2, axis=0) / (g * n**a) ** 2 + (w3 @ w3) * np.sum(H1**2, axis=0) / (g * n ** (2 * a)) ** 2
                   + (u1 @ u1) * np.sum(X**2, axis=0) / (g * n**a1 * np.sqrt(Dn)) ** 2)
            ds_w3 = g**-2 * (2 * n ** (-2 * a) * w3 + 2 * n ** (-4 * a) * (p2 @ W2.T))
            # <df/dw3, ds/dw3> + <df/dW2, ds/dW2>, with df/dW2 = w3 h1^T/(g N^2a), ds/dW2 = 2 g^-2 N^-4a w3 p2^T
            grad_dot = (ds_w3 @ H2) / (g * n**a) + 2 * g**-3 * n ** (-6 * a) * (w3 @ w3) * (p2 @ H1)
            q = eta / s * delta * ntk
            r = eta * loss / s**2 * grad_dot
            w3_rms = np.sqrt(np.mean(w3**2))
            d_term = n ** (-a) * eta * loss / s**2 * 2 * g**-2 * n ** (-4 * a) * (p2 @ H1) * w3_rms
            bp_term = n ** (-a) * eta / s * delta * np.sum(H1**2, axis=0) / (g * n ** (2 * a)) * w3_rms
            acc.append(np.stack([np.abs(q), np.abs(r), np.abs(d_term), np.abs(bp_term),
                                 np.full(P, s - 1), np.abs(f)], axis=1))
        rows.append(np.sqrt(np.mean(np.concatenate(acc) ** 2, axis=0)))
    table = np.array(rows)
    keys = ("q", "r", "D", "bp_feature", "s_minus_1", "f")
    width = np.array(ws, float)
    terms = {k: table[:, i] for i, k in enumerate(keys)}
    slopes = {k: loglog_slope(width, terms[k]) for k in keys} if len(set(ws)) >= 2 else None
    return PCTerms(width=width, q=terms["q"], r=terms["r"], D=terms["D"], bp_feature=terms["bp_feature"],
                   s_minus_1=terms["s_minus_1"], f=terms["f"], slopes=slopes)


# --------------------------------------------------------------------------- CLI helper
def cli_abcd(check_args: list[str] | None = None, as_json: bool = False, reading: str = "paper",
             widths: Sequence[float] | None = None, depth: int = 1, gamma0: float = 1.0) -> int:
    """`resprop abcd`: the family and Table 2, or --check KEY=VALUE ..., or --width N ... (PC rates at ``depth``
    residual layers, L = depth + 2 weight matrices)."""
    import json

    if check_args:
        out = check(check_args, reading).to_dict()
        if as_json:
            print(json.dumps(out))
        else:
            for alg, ds in out.items():
                print(f"{alg}: " + ", ".join(f"D{k} {'yes' if v else 'no'}" for k, v in ds.items()))
        return 0
    if widths:
        out = rates(widths, depth, gamma0).to_dict()
        if as_json:
            print(json.dumps(out))
        else:
            for k, v in out.items():
                print(f"{k}: {v}")
        return 0
    out = {"solution_family": solution_family().to_dict(), "table2": table2().to_dict()}
    if as_json:
        print(json.dumps(out))
        return 0
    fam = out["solution_family"]
    print("eq. 15 family (free c): " + ", ".join(f"{k} = {v}" for k, v in fam["family"].items() if k != "free"))
    for k, v in fam["depth"].items():
        print(f"{k}: {v}")
    print(f"PC r, D on the family: N^({fam['pc_rates']['r_exponent_on_family']}), "
          f"N^({fam['pc_rates']['D_exponent_on_family']}) (paper's counting; sharp at init: "
          f"{fam['pc_rates']['sharp_exponents_on_family']['init']})")
    for name, row in out["table2"]["parameterisations"].items():
        print(f"{name:10s} " + " ".join(f"{k}={v}" for k, v in row["exponents"].items()) + " | bp "
              + "".join("Y" if row["bp"][k] else "n" for k in "123") + " | pc "
              + "".join("Y" if row["pc"][k] else "n" for k in "123")
              + ("" if row["agrees_with_paper"] else "  (paper §2.3 differs)"))
    return 0
