"""``resprop.fluctuations`` against Monte Carlo of explicit finite-width networks (issue 27, item 3).

Regime: the theory is the leading order in 1/width at FIXED depth, so each configuration is simulated at fixed
depth and growing width (64 -> 1024 for the covariance, 16 -> 128 with many more samples for the mean shift,
whose standard error grows like sqrt(width); `fluctuation_mc.fluctuation_campaign`) and the simulated
R_n = width Cov[K^_ab, K^_cd] and m_n = width (E K^ - K) are extrapolated to width -> oo with R_n = R_oo + a/n
(+ b/n^2 when the linear fit is rejected, `width_extrapolation.extrapolate`).  Verdict per entry:

    |R_oo - engine| <= 4 SE_oo + systematic + engine truncation estimate,

with the systematic |R_oo(a/n) - R_oo(a/n + b/n^2)| when both fits are acceptable (0 otherwise).  Every row also
carries the closure value (PDLT App. B, B.25/B.26) and its z-score, to show where the correction matters.

The quick campaign (:data:`QUICK`, a minute on 2 cores) runs in the default test suite; the full one
(:data:`FULL`) with ``python -m resprop.numeric.engine.fluctuation_check --full --out DIR`` (tens of minutes),
writing ``DIR/fluctuations_campaign.json`` and ``.md`` through `output.Publication`; docs/fluctuations.md holds its
table.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import dataclass, field

import numpy as np

__all__ = ["Config", "QUICK", "FULL", "compare", "run", "markdown_table", "main"]

#: inputs of unequal norm and angle (norm ratios up to 3, pairwise angles 45-90 degrees), d_in = 3
INPUTS = {
    2: np.array([[1.0, 0.0, 0.0], [1.2, 1.2, 0.0]]),
    3: np.array([[0.6, 0.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.9, 1.5]]),
    4: np.array([[0.6, 0.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.9, 1.5], [-0.8, 0.3, 0.6]]),
}


@dataclass(frozen=True)
class Config:
    """One configuration of the campaign (the arguments of ``resprop.fluctuations``)."""

    activation: str
    P: int
    depth: int
    gamma: float
    branch_scale: float | str
    sigma_w2: float = 1.5
    sigma_b2: float = 0.1
    widths: tuple = (64, 128, 256, 512, 1024)
    samples: tuple = (40000, 30000, 20000, 20000, 20000)
    #: the mean shift's campaign: its SE^2 ~ width C / samples, so small widths buy it cheaply
    mean_widths: tuple = (16, 32, 64, 128)
    mean_samples: tuple = (400000, 200000, 100000, 50000)
    extra: tuple = field(default=())  # quadruples beyond the variances

    @property
    def label(self) -> str:
        return (f"{self.activation}, P={self.P}, L={self.depth}, gamma={self.gamma:g}, "
                f"lambda={self.branch_scale}")


#: the quick campaign: every activation, gamma in {0, 1}, a branch scale, an expression and a piecewise one with
#: breakpoints away from 0, P = 2-3, depths 1-4
def _quick(activation: str, P: int, depth: int, gamma: float, branch_scale: float | str, extra=()) -> Config:
    return Config(activation, P, depth, gamma, branch_scale, widths=(64, 128, 256, 512), samples=(8000,) * 4,
                  mean_samples=(80000, 40000, 20000, 10000), extra=extra)


QUICK = (
    _quick("relu", 2, 3, 1.0, 0.7),
    _quick("tanh", 3, 2, 1.0, 0.8, extra=((0, 1, 1, 2),)),
    _quick("gelu", 2, 4, 1.0, "1/sqrt(L)"),
    _quick("erf", 2, 2, 0.0, 1.0),
    _quick("sin(x) + x**2/10", 2, 2, 1.0, 0.6),
    _quick("Max(-1, Min(1, x))", 2, 2, 1.0, 0.8),  # hardtanh: breakpoints at +-1, the rules split there
)

#: the full campaign (docs/fluctuations.md): five activations, gamma in {0, 1}, branch scales, P = 2-4, depths 1-10
FULL = tuple(
    Config(act, P, depth, gamma, lam, extra=((0, 1, 1, 2),) if P >= 3 else ())
    for act in ("erf", "tanh", "relu", "gelu", "sin(x) + x**2/10")
    for (P, depth, gamma, lam) in ((2, 1, 1.0, 1.0), (2, 2, 0.0, 1.0), (3, 4, 1.0, 0.5), (2, 10, 1.0, "1/sqrt(L)"),
                                   (4, 3, 1.0, 0.8))
)


def _row(cfg: Config, kind: str, index: tuple, mc, theory: float, trunc: float, closure: float) -> dict:
    sys_ = float(mc.systematic) if mc.systematic is not None else 0.0
    tol = 4.0 * mc.se + sys_ + trunc
    return {"case": cfg.label, "quantity": kind, "index": [int(i) for i in index], "R_inf": float(mc.value),
            "se": float(mc.se), "model": mc.model, "p_value": float(mc.p_value), "systematic": sys_,
            "theory": float(theory), "truncation": float(trunc), "z": float((mc.value - theory) / mc.se),
            "closure": float(closure), "z_closure": float((mc.value - closure) / mc.se),
            "agrees": bool(abs(mc.value - theory) <= tol)}


#: the truncation the 3- and 4-input covariances are raised to here: the simulations' standard errors are above
#: 1e-3 of the values, so a truncation below 1e-4 cannot change a verdict (and the channel ladder's last rungs cost
#: seconds per quadruple group)
COVARIANCE_RTOL = 1e-4


def compare(cfg: Config, seed: int = 2027, progress=None) -> list[dict]:
    """Engine vs extrapolated simulation for one configuration: one row per variance entry a <= b, per extra
    quadruple (covariance) and per mean-shift entry a <= b (see the module docstring for the verdict)."""
    from resprop.numeric.engine.fluctuation_mc import fluctuation_campaign
    from resprop.numeric.engine.fluctuations import fluctuations

    X = INPUTS[cfg.P]
    a, b = np.triu_indices(cfg.P)
    quads = np.array([(i, j, i, j) for i, j in zip(a, b)] + [tuple(q) for q in cfg.extra], dtype=np.int64)
    fl = fluctuations(X, cfg.activation, cfg.depth, cfg.widths[-1], cfg.sigma_w2, cfg.sigma_b2, cfg.gamma,
                      cfg.branch_scale, progress=False)
    camp = fluctuation_campaign(X, cfg.activation, cfg.depth, cfg.sigma_w2, cfg.sigma_b2, cfg.gamma, cfg.branch_scale,
                                widths=cfg.widths, samples=cfg.samples, seed=seed, quadruples=quads,
                                progress=progress)
    shifts = fluctuation_campaign(X, cfg.activation, cfg.depth, cfg.sigma_w2, cfg.sigma_b2, cfg.gamma,
                                  cfg.branch_scale, widths=cfg.mean_widths, samples=cfg.mean_samples, seed=seed + 1,
                                  quadruples=quads[:1], progress=progress)
    theory = fl.covariance(quads, rtol=COVARIANCE_RTOL)
    rows = []
    for k, q in enumerate(quads):
        i, j, c, d = q
        variance = (i, j) == (c, d)
        trunc = float(fl.variance_truncation[i, j]) if variance else 0.0
        closure = float(fl.closure_variance[i, j]) if variance else math.nan
        rows.append(_row(cfg, "variance" if variance else "covariance", tuple(q), camp.covariance[k], theory[k],
                         trunc, closure))
    for k, (i, j) in enumerate(shifts.mean_shift_pairs):
        mc = shifts.mean_shift[k]
        if mc is not None:
            rows.append(_row(cfg, "mean_shift", (i, j), mc, fl.mean_shift[i, j], fl.mean_shift_truncation[i, j],
                             fl.closure_mean_shift[i, j]))
    return rows


def run(configs=FULL, seed: int = 2027, progress=None) -> dict:
    """All configurations; the rows and the time of each."""
    rows, seconds = [], {}
    for cfg in configs:
        t0 = time.perf_counter()
        rows += compare(cfg, seed, progress)
        seconds[cfg.label] = round(time.perf_counter() - t0, 1)
        if progress is not None:
            progress(f"{cfg.label}: {seconds[cfg.label]} s")
    return {"seed": seed, "rows": rows, "seconds": seconds,
            "agree": sum(r["agrees"] for r in rows), "total": len(rows)}


def markdown_table(res: dict) -> str:
    lines = ["| case | quantity | entry | R_inf +- SE (fit) | theory | z | closure (B.25/B.26) | z closure |",
             "|---|---|---|---|---|---|---|---|"]
    for r in res["rows"]:
        closure = "—" if math.isnan(r["closure"]) else f"{r['closure']:.5g}"
        zc = "—" if math.isnan(r["closure"]) else f"{r['z_closure']:+.1f}"
        lines.append(f"| {r['case']} | {r['quantity']} | {tuple(r['index'])} | {r['R_inf']:.5g} +- {r['se']:.2g} "
                     f"({r['model']}) | {r['theory']:.5g} | {r['z']:+.1f} | {closure} | {zc} |")
    lines.append("")
    lines.append(f"{res['agree']} of {res['total']} entries within 4 SE + systematic + truncation.")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--full", action="store_true", help="the full campaign (default: the quick one)")
    ap.add_argument("--seed", type=int, default=2027)
    ap.add_argument("--out", required=True, help="output directory (written through resprop's output rules)")
    args = ap.parse_args(argv)
    from resprop.numeric.engine.output import Publication

    res = run(FULL if args.full else QUICK, args.seed, progress=lambda s: print(s, file=sys.stderr))
    with Publication(args.out, "dir", "resprop.numeric.engine.fluctuation_check") as pub:
        (pub.path / "fluctuations_campaign.json").write_text(json.dumps(res, indent=1) + "\n")
        (pub.path / "fluctuations_campaign.md").write_text(markdown_table(res))
        pub.commit()
    print(markdown_table(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
