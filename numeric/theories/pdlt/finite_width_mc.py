"""Monte Carlo of the residual MLP's finite-width norm fluctuations in PDLT's own regime (fixed depth, growing width).

Setting (Roberts, Yaida & Hanin, *The Principles of Deep Learning Theory*, App. B, eq. B.3 with xi = 1, C_b = 0):
one input, z^0_i iid N(0, 1) over the width n (the book's K^(1) = 1, V^(1) = 0), then ``depth`` residual layers

    z^(l+1) = gamma z^(l) + W^(l) phi(z^(l)),   W^(l)_ij iid N(0, C_W/n), fresh per layer,

at the critical C_W(gamma) (B.20 / B.21; see :func:`default_C_W` for GELU).  The measured quantity is

    R_n(d) = n Var[S_d] / E[S_d]^2,   S_d = ||z^(d)||^2 / n,

whose width -> infinity limit is 2 + V/K^2 at the output layer (B.22-B.23: Var S = (2 K^2 + V)/n + O(1/n^2)),
so B.26 predicts R_inf(d) = 2 + V^(d)/K^(d)^2 from ``vertex_trajectory(depth=d)``.  Depth convention
(docs/api-renames.md, "Depth: one convention"): ``depth`` d is the number of residual layers after the input z^0
(layer 0, the book's layer 1, so the book's L is d + 1).  ReLU at gamma^2 = 1/2: R_inf(1) = 2 + nu = 4.25, B.26
gives 6.50 at d = 2.

Exact reduction (no weight matrices).  Given z^(l), the vector W phi(z^(l)) is N(0, sigma_l^2 I_n) with
sigma_l^2 = C_W ||phi(z^(l))||^2 / n, independent of z^(l); so z^(l+1) = gamma z^(l) + sigma_l xi with a fresh
standard normal vector xi.  This is an identity in law for the whole chain, and one sample costs O(n d).

Estimator (conditioning on the last layer, an exact Rao-Blackwellisation).  With m = E[S_d | z^(d-1)] =
gamma^2 S_{d-1} + sigma_{d-1}^2 and v = Var[S_d | z^(d-1)] = (4 gamma^2 sigma_{d-1}^2 S_{d-1} + 2 sigma_{d-1}^4)/n
(from Var[(a + b xi)^2] = 4 a^2 b^2 + 2 b^4), the law of total variance gives Var S_d = E[v] + Var[m] and
E S_d = E[m].  R_hat = n (mean v + sample variance of m) / (mean m)^2; its standard error is the delta method on
the three sample means (v, m, m^2) with their sample covariance (checked against repeated seeds in
tests/test_pdlt_finite_width_mc.py).

Width extrapolation (:func:`extrapolate_ratio`; the rule lives in :mod:`resprop.numeric.engine.width_extrapolation`,
whose ``fit_ratio`` and ``CHI2_P_MIN`` are re-exported here): weighted least squares R_n = R_inf + a/n over the widths
128 ... 4096 (weights 1/se_n^2, independent seeds per width); when that fit is bad (chi^2 p-value < 0.01) the
model R_inf + a/n + b/n^2 is used instead, and the result says which.  R_inf's standard error is the WLS one,
scaled by sqrt(chi^2/dof) when that exceeds 1.

Randomness: samples are processed in chunks of about ``CHUNK_BYTES`` per work array; chunk k draws from its own
Generator seeded by the k-th child of ``SeedSequence([seed, width])``, so results are deterministic given
(seed, width), and a shorter-depth run sees the same draws as the first layers of a deeper one.
"""
from __future__ import annotations

import argparse
import importlib
import json
import math
import sys
import time
from dataclasses import dataclass, field

import numpy as np
from scipy.special import ndtr

from resprop.numeric.engine import validation as V
from resprop.numeric.engine.monte_carlo import resolve_activation
from resprop.numeric.engine.validation import ParameterError
from resprop.numeric.engine.width_extrapolation import CHI2_P_MIN, fit_ratio  # noqa: F401  (moved to the engine)
from resprop.numeric.engine.width_extrapolation import wls as _wls  # noqa: F401  (the old private name)

__all__ = ["simulate_norm_ratio", "simulate_norm_ratios", "extrapolate_ratio", "extrapolate_ratios",
           "default_C_W", "b26_ratio_vertex", "run_campaign", "WIDTHS", "CAMPAIGN", "ACTIVATIONS"]

#: widths of the extrapolation (fixed depth, growing width)
WIDTHS = (128, 256, 512, 1024, 2048, 4096)
#: activations accepted here: relu, leaky_relu:<A> (a_+ = 1, a_- = A), tanh, erf, gelu
ACTIVATIONS = ("relu", "leaky_relu:<A>", "tanh", "erf", "gelu")
#: bytes of one (chunk, width) work array
CHUNK_BYTES = 2**20
#: the campaign: depths (nested in one run per width), activations and gamma^2
CAMPAIGN = {"depths": (1, 2, 4, 8), "activations": ("relu", "leaky_relu:0.5", "tanh", "gelu"),
            "gamma2": (0.0, 0.25, 0.5, 0.75)}
#: networks at the smallest width per activation (at width n: x sqrt(128/n)).  tanh gets the most: its gap
#: between B.26 and the corrected theory is ~1% (d = 4, gamma^2 = 1/2), resolved here to about 6 SE; GELU costs
#: 2x per sample (the normal CDF).  About 11 minutes on one core in all.
CAMPAIGN_SAMPLES = {"relu": 150000, "leaky_relu:0.5": 150000, "tanh": 300000, "gelu": 80000}
_DTYPE = np.float64


def _check_activation(activation) -> str:
    if not isinstance(activation, str):
        raise ParameterError("activation", f"must be one of {', '.join(ACTIVATIONS)}, got {activation!r}")
    if activation in ("relu", "tanh", "erf", "gelu") or activation.startswith("leaky_relu:"):
        resolve_activation(activation)  # validates the slope
        return activation
    raise ParameterError("activation", f"must be one of {', '.join(ACTIVATIONS)}, got {activation!r}")


def _check_gamma2(gamma2) -> float:
    g2 = float(V.real("gamma2", gamma2))
    if not 0.0 <= g2 < 1.0:
        raise ParameterError("gamma2", f"must lie in [0, 1) (criticality needs gamma^2 < 1), got {g2}")
    return g2


def _gelu_mean_sq(K: float = 1.0) -> float:
    """<gelu(z)^2> for z ~ N(0, K), by Gauss-Hermite quadrature (200 nodes)."""
    x, w = np.polynomial.hermite_e.hermegauss(200)
    z = math.sqrt(K) * x
    g = 0.5 * z * (1.0 + np.vectorize(math.erf)(z / math.sqrt(2.0)))
    return float(np.dot(w, g * g) / math.sqrt(2.0 * math.pi))


def default_C_W(activation: str, gamma2: float) -> float:
    """Critical C_W(gamma) with C_b = 0.

    relu, leaky_relu:A: B.20, C_W = (1 - gamma^2)/A_2 with A_2 = (1 + A^2)/2; tanh, erf: B.21,
    C_W = (1 - gamma^2)/sigma_1^2 (both from :func:`resprop.numeric.theories.pdlt.residual_mlp.critical_C_W`).
    GELU is in neither class (PDLT §5.3: sigma(0) = 0 but a_1 > 0, so no critical K* = 0 tuning exists); here
    C_W preserves the input kernel for one step, C_W = (1 - gamma^2)/<gelu(z)^2>_{K = 1}, so that K^(2) = K^(1)
    = 1, and K = 1 is then a fixed point of B.12 at every layer (chi_par != 1).  This is the C_W of
    :func:`resprop.numeric.theories.pdlt.corrected.critical_C_W`.
    """
    activation, g2 = _check_activation(activation), _check_gamma2(gamma2)
    if activation == "gelu":
        return (1.0 - g2) / _gelu_mean_sq(1.0)
    from resprop.numeric.theories.pdlt.residual_mlp import critical_C_W

    return float(critical_C_W(math.sqrt(g2), activation))


def b26_ratio_vertex(activation: str, gamma2: float, depth: int) -> float:
    """B.26's R_inf(d) = 2 + V/K^2 after d residual layers (the last layer of ``vertex_trajectory(depth=d)``, from
    K = 1, V = 0 at the input z^0; the book's layer d + 1).  relu, leaky_relu, tanh, erf only (the scale-invariant
    and K* = 0 classes)."""
    from resprop.numeric.theories.pdlt.residual_mlp import vertex_trajectory

    depth = V.integer("depth", depth, minimum=0)
    tr = vertex_trajectory(_check_activation(activation), gamma=math.sqrt(_check_gamma2(gamma2)), depth=depth)
    return 2.0 + float(tr["V_over_K2"][-1])


def _gelu(x: np.ndarray) -> np.ndarray:
    """GELU x Phi(x) (ndtr is the standard normal CDF; faster than the erf form)."""
    return x * ndtr(x)


def _activation_function(activation: str):
    """phi as a NumPy function: leaky ReLU with slope A in [0, 1] as max(x, A x) (one pass), GELU as x Phi(x),
    the others from the engine (resolve_activation)."""
    if activation == "gelu":
        return _gelu
    if activation.startswith("leaky_relu:"):
        A = float(activation.split(":", 1)[1])
        if 0.0 <= A <= 1.0:
            return lambda x: np.maximum(x, A * x)
    return resolve_activation(activation)[0]


def _chunk_rows(width: int) -> int:
    return max(8, CHUNK_BYTES // (np.dtype(_DTYPE).itemsize * width))


def _layer_statistics(phi, gamma: float, C_W: float, depth: int, width: int, samples: int, seed: int):
    """Per sample and layer l = 0..depth-1: S_l = ||z^(l)||^2/n and sigma_l^2 = C_W ||phi(z^(l))||^2/n."""
    S = np.empty((samples, depth))
    sig2 = np.empty((samples, depth))
    rows = _chunk_rows(width)
    starts = range(0, samples, rows)
    children = np.random.SeedSequence([seed, width]).spawn(len(starts))
    for start, child in zip(starts, children):
        stop = min(start + rows, samples)
        rng = np.random.default_rng(child)
        z = rng.standard_normal((stop - start, width), dtype=_DTYPE)
        xi = np.empty_like(z)
        for l in range(depth):
            p = phi(z)
            S[start:stop, l] = np.einsum("ij,ij->i", z, z) / width
            sig2[start:stop, l] = C_W * np.einsum("ij,ij->i", p, p) / width
            if l == depth - 1:
                break
            rng.standard_normal(out=xi, dtype=_DTYPE)
            xi *= np.sqrt(sig2[start:stop, l])[:, None]
            if gamma:
                z *= gamma
                z += xi
            else:
                z, xi = xi, z
    return S, sig2


@dataclass(frozen=True)
class RatioEstimate:
    """R_hat = n Var[S_d]/E[S_d]^2 at one width and depth, its delta-method standard error and the mean E[S_d]."""

    R: float
    se: float
    mean: float
    samples: int


def _estimate(S: np.ndarray, sig2: np.ndarray, gamma2: float, width: int) -> RatioEstimate:
    """The Rao-Blackwellised estimator of the module docstring from S_{d-1}, sigma_{d-1}^2 (one per sample)."""
    N = S.shape[0]
    m = gamma2 * S + sig2
    v = (4.0 * gamma2 * sig2 * S + 2.0 * sig2 * sig2) / width
    A, B = float(v.mean()), float(m.mean())
    dm = m - B
    var_m = float(dm @ dm) / (N - 1)
    R = width * (A + var_m) / B**2
    # delta method: R's influence function, IF_i = n/B^2 [(v_i - A) + (dm_i^2 - var_m)] - 2 R/B (m_i - B)
    # (the sample variance's own dependence on the mean B is second order), se = sd(IF)/sqrt(N)
    infl = (width / B**2) * ((v - A) + (dm * dm - var_m)) - (2.0 * R / B) * dm
    se = float(np.std(infl, ddof=1)) / math.sqrt(N)
    return RatioEstimate(R=R, se=se, mean=B, samples=N)


def simulate_norm_ratios(activation: str, gamma2: float, depths, width: int, samples: int, seed: int, *,
                         C_W: float | None = None) -> dict[int, RatioEstimate]:
    """:func:`simulate_norm_ratio` at several depths from one set of trajectories (the deepest one's); the
    estimates at different depths share samples and are correlated."""
    activation, g2 = _check_activation(activation), _check_gamma2(gamma2)
    depths = sorted({V.integer("depth", d, minimum=1, maximum=10**4) for d in np.atleast_1d(depths).tolist()})
    width = V.integer("width", width, minimum=2, maximum=2**24)
    samples = V.integer("samples", samples, minimum=3)
    seed = V.integer("seed", seed, minimum=0)
    C_W = default_C_W(activation, g2) if C_W is None else float(V.positive("C_W", C_W))
    if samples * (max(depths) + 1) * 16 > 2**33:
        raise ParameterError("samples", f"samples x depth = {samples} x {max(depths)} needs more than 8 GiB")
    phi = _activation_function(activation)
    S, sig2 = _layer_statistics(phi, math.sqrt(g2), C_W, max(depths), width, samples, seed)
    V.finite_result("gamma2, C_W, depth", S, "||z||^2/n")
    return {d: _estimate(S[:, d - 1], sig2[:, d - 1], g2, width) for d in depths}


def simulate_norm_ratio(activation: str, gamma2: float, depth: int, width: int, samples: int, seed: int, *,
                        C_W: float | None = None) -> tuple[float, float]:
    """(R_hat, standard error) of R_n(d) = n Var[||z^d||^2/n] / E[||z^d||^2/n]^2 for the residual MLP (B.3).

    ``samples`` independent networks of width ``width`` and ``depth`` residual layers from z^0 ~ N(0, I_n),
    C_b = 0, C_W = ``C_W`` or :func:`default_C_W`.  Estimator: the last-layer Rao-Blackwellisation of the module
    docstring; standard error: delta method.
    """
    est = simulate_norm_ratios(activation, gamma2, [depth], width, samples, seed, C_W=C_W)[
        V.integer("depth", depth, minimum=1)]
    return est.R, est.se


@dataclass(frozen=True)
class Extrapolation:
    """WLS width extrapolation of R_n (see the module docstring)."""

    R_inf: float
    se: float
    model: str                # "a/n" or "a/n + b/n^2"
    coefficients: tuple       # (a,) or (a, b)
    chi2: float
    dof: int
    p_value: float
    chi2_a_over_n: float      # chi^2 of the a/n fit (also when it was rejected)
    widths: tuple
    R_n: tuple
    se_n: tuple
    samples_n: tuple
    extra: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"R_inf": self.R_inf, "se": self.se, "model": self.model, "coefficients": list(self.coefficients),
                "chi2": self.chi2, "dof": self.dof, "p_value": self.p_value, "chi2_a_over_n": self.chi2_a_over_n,
                "widths": list(self.widths), "R_n": list(self.R_n), "se_n": list(self.se_n),
                "samples_n": list(self.samples_n)}


def _samples_at(samples: int, widths, power: float) -> list[int]:
    n0 = min(widths)
    return [max(3, int(round(samples * (n0 / n) ** power))) for n in widths]


def extrapolate_ratios(activation: str, gamma2: float, depths, *, widths=WIDTHS, samples: int = 20000,
                       seed: int = 0, allocation_power: float = 0.5, C_W: float | None = None
                       ) -> dict[int, Extrapolation]:
    """:func:`extrapolate_ratio` at several depths, each width simulated once to the deepest depth.

    ``samples`` networks at the smallest width, ``samples (n_min/n)^allocation_power`` at width n (the default
    1/2 balances the cost, proportional to n, against the standard error of the intercept).
    """
    widths = tuple(V.integer("width", n, minimum=2) for n in widths)
    if len(set(widths)) < 3:
        raise ParameterError("widths", f"need at least 3 distinct widths, got {widths}")
    samples = V.integer("samples", samples, minimum=3)
    counts = _samples_at(samples, widths, float(V.nonnegative("allocation_power", allocation_power)))
    per_width = [simulate_norm_ratios(activation, gamma2, depths, n, N, seed, C_W=C_W)
                 for n, N in zip(widths, counts)]
    out = {}
    for d in per_width[0]:
        R = [pw[d].R for pw in per_width]
        se = [pw[d].se for pw in per_width]
        R_inf, s, model, coef, chi2, dof, p, chi2_1 = fit_ratio(widths, R, se)
        out[d] = Extrapolation(R_inf, s, model, coef, chi2, dof, p, chi2_1, widths, tuple(R), tuple(se),
                               tuple(counts))
    return out


def extrapolate_ratio(activation: str, gamma2: float, depth: int, *, widths=WIDTHS, samples: int = 20000,
                      seed: int = 0, allocation_power: float = 0.5, C_W: float | None = None) -> Extrapolation:
    """R_inf(d) = lim_n R_n(d) +- se by WLS over ``widths`` (model a/n, or a/n + b/n^2 when chi^2 rejects it)."""
    depth = V.integer("depth", depth, minimum=1)
    return extrapolate_ratios(activation, gamma2, [depth], widths=widths, samples=samples, seed=seed,
                              allocation_power=allocation_power, C_W=C_W)[depth]


# --------------------------------------------------------------------------- campaign
def _theories(activation: str, gamma2: float, depth: int) -> dict:
    """corrected and B.26 R_inf(d): from resprop.numeric.theories.pdlt.corrected when it is importable, else B.26
    from the vertex trajectory (None where a theory does not cover the activation)."""
    out: dict = {"corrected": None, "b26": None}
    try:
        C = importlib.import_module("resprop.numeric.theories.pdlt.corrected")
    except ImportError:
        C = None
    if C is not None:
        for key, fn in (("corrected", "corrected_ratio"), ("b26", "b26_ratio")):
            try:
                out[key] = float(getattr(C, fn)(activation, gamma2, depth))
            except (ParameterError, AttributeError, NotImplementedError):
                pass
    if out["b26"] is None and activation != "gelu":
        out["b26"] = b26_ratio_vertex(activation, gamma2, depth)
    return out


def run_campaign(*, samples: dict | None = None, seed: int = 2026, campaign=None, progress=None) -> dict:
    """The fixed-depth, growing-width campaign: R_inf +- se for every (activation, gamma^2, depth) of
    ``campaign`` (default :data:`CAMPAIGN`) against the corrected theory and B.26, with deviations in sigma.
    ``samples``: networks at the smallest width per activation (default :data:`CAMPAIGN_SAMPLES`)."""
    campaign = dict(CAMPAIGN if campaign is None else campaign)
    samples = dict(CAMPAIGN_SAMPLES if samples is None else samples)
    rows = []
    t0, c0 = time.perf_counter(), time.process_time()
    for ai, act in enumerate(campaign["activations"]):
        for gi, g2 in enumerate(campaign["gamma2"]):
            ext = extrapolate_ratios(act, g2, campaign["depths"], samples=samples[act], seed=seed + 100 * ai + gi)
            for d, e in ext.items():
                th = _theories(act, g2, d)
                row = {"activation": act, "gamma2": g2, "depth": d, "C_W": default_C_W(act, g2), **e.as_dict(),
                       "corrected": th["corrected"], "b26": th["b26"]}
                for key in ("corrected", "b26"):
                    row[f"dev_{key}_sigma"] = None if th[key] is None else (e.R_inf - th[key]) / e.se
                rows.append(row)
            if progress:
                progress(f"{act} gamma^2={g2}: {time.perf_counter() - t0:.0f} s wall, "
                         f"{time.process_time() - c0:.0f} s CPU")
    return {"setting": "single input, z^0 ~ N(0, I_n), C_b = 0, critical C_W (default_C_W), R = n Var S/E[S]^2, "
                       "S = ||z^d||^2/n; WLS R_n = R_inf + a/n (+ b/n^2 if chi^2 p < 0.01)",
            "samples_at_smallest_width": samples, "allocation": "samples x sqrt(128/n) at width n", "seed": seed,
            "campaign": {k: list(v) for k, v in campaign.items()},
            "seconds_wall": time.perf_counter() - t0, "seconds_cpu": time.process_time() - c0, "rows": rows}


def markdown_table(result: dict) -> str:
    """The campaign's rows as a Markdown table."""
    def f(x, fmt):
        return "n/a" if x is None else format(x, fmt)

    lines = ["| activation | gamma^2 | d | R_inf +- se | fit | chi^2/dof | corrected | dev (sigma) | B.26 | "
             "dev (sigma) |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        lines.append(f"| {r['activation']} | {r['gamma2']:g} | {r['depth']} | {r['R_inf']:.4f} +- {r['se']:.4f} | "
                     f"{r['model']} | {r['chi2']:.1f}/{r['dof']} | {f(r['corrected'], '.4f')} | "
                     f"{f(r['dev_corrected_sigma'], '+.1f')} | {f(r['b26'], '.4f')} | "
                     f"{f(r['dev_b26_sigma'], '+.1f')} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Residual-MLP finite-width campaign (PDLT App. B, fixed depth).")
    ap.add_argument("--campaign", action="store_true", help="run the full campaign")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply the campaign's sample sizes")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--out", help="JSON output file")
    ap.add_argument("--markdown", help="Markdown table output file")
    args = ap.parse_args(argv)
    if not args.campaign:
        ap.print_help()
        return 2
    sizes = {k: max(3, int(v * args.scale)) for k, v in CAMPAIGN_SAMPLES.items()}
    res = run_campaign(samples=sizes, seed=args.seed, progress=lambda s: print(s, file=sys.stderr))
    text = json.dumps(res, indent=1)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")
    if args.markdown:
        with open(args.markdown, "w") as fh:
            fh.write(markdown_table(res))
    if not args.out and not args.markdown:
        print(markdown_table(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
