"""abcd parameterisations (Innocenti et al. 2025): exact case-analysis solve vs the linprog cross-check.

Workload:

* exact solve: every system, from scratch (the caches of resprop.derive.theories.abcd are cleared before each call):
  {BP, PC} x {paper, literal reading} x {D1-D3, D4-D5, each of D1..D5 alone} = 28 systems.  Each is
  power-counted, split into cases (which argument attains every max), and every case is solved with
  sympy.linsolve plus exact rational Fourier--Motzkin (feasibility, redundant inequalities dropped).
* LP cross-check: the same 28 systems' cases re-decided by scipy.optimize.linprog (HiGHS, strict
  inequalities through a maximised slack), plus lp_classify on the 4 Table-2 parameterisations and on
  200 seeded random rational parameterisations (alpha and nu included for most).
* exact classify on the same 200 points (rational arithmetic), for comparison with lp_classify.

Every LP verdict must agree with the exact one; the script exits with an error otherwise.
"""
from __future__ import annotations

import random
from fractions import Fraction as F

import _common as C

from resprop.derive.theories import abcd as A

REPEATS = 3
N_POINTS = 200
SYSTEMS = [(alg, reading, numbers) for alg in A.ALGORITHMS for reading in A.READINGS
           for numbers in (A.WIDTH_DESIDERATA, A.DEPTH_DESIDERATA, (1,), (2,), (3,), (4,), (5,))]


def points(n: int = N_POINTS, seed: int = 2025) -> list:
    rng = random.Random(seed)
    grid = [F(k, 2) for k in range(-2, 3)] + [F(1, 4), F(-3, 4)]
    out = []
    for i in range(n):
        if i % 3 == 0:
            cv = F(rng.randint(-8, 8), rng.choice([1, 2, 3, 4]))
            p = {"a1": -cv / 2, "b1": cv, "a": (1 - cv) / 2, "b": cv, "c": cv, "d": F(1, 2)}
        else:
            p = {k: rng.choice(grid) for k in ("a1", "b1", "a", "b", "c", "d")}
        al = rng.choice([None, F(0), F(1, 2), F(1), F(rng.randint(-4, 8), 4)])
        nu = rng.choice([None, F(1, 2), F(1), F(3, 2)]) if al is not None else None
        out.append((p, al, nu))
    return out


def _clear() -> None:
    for fn in (A.desiderata, A.solution, A.desideratum_cases):
        fn.cache_clear()


def exact_solve() -> dict:
    _clear()
    out = {}
    for alg, reading, numbers in SYSTEMS:
        pieces = A.solve_system(*A.system(alg, reading, numbers))
        out[(alg, reading, numbers)] = [p.feasible for p in pieces]
    return out


def lp_check(pts) -> dict:
    cases = {key: [r["lp"] for r in A.lp_cross_check_cases(*key)] for key in SYSTEMS}
    table = {name: A.lp_classify(p) for name, p in A.TABLE2.items()}
    verdicts = [A.lp_classify(p, al, nu) for p, al, nu in pts]
    return {"cases": cases, "table2": table, "points": verdicts}


def exact_classify(pts) -> list:
    return [A.classify(p, al, nu) for p, al, nu in pts]


def run() -> dict:
    info = C.machine_info()
    C.print_machine(info)
    pts = points()
    print(f"\nabcd: {len(SYSTEMS)} systems (BP/PC x paper/literal x D1-D3, D4-D5, D1..D5), "
          f"{len(pts)} random rational parameterisations\n")
    t_exact = C.timeit(exact_solve, repeats=REPEATS)
    t_lp = C.timeit(lambda: lp_check(pts), repeats=REPEATS)
    t_cls = C.timeit(lambda: exact_classify(pts), repeats=REPEATS)
    exact, lp, cls = t_exact.pop("value"), t_lp.pop("value"), t_cls.pop("value")
    n_cases = sum(len(v) for v in exact.values())
    n_feasible = sum(sum(v) for v in exact.values())
    agree_cases = all(exact[k] == lp["cases"][k] for k in SYSTEMS)
    agree_table = all(lp["table2"][n] == A.classify(p) for n, p in A.TABLE2.items())
    agree_points = lp["points"] == cls
    C.print_table(["step", "best s", "median s", "per item ms"], [
        [f"exact solve ({len(SYSTEMS)} systems, {n_cases} cases)", t_exact["best_s"], t_exact["median_s"],
         1e3 * t_exact["best_s"] / n_cases],
        [f"LP cross-check (cases + Table 2 + {len(pts)} points)", t_lp["best_s"], t_lp["median_s"],
         1e3 * t_lp["best_s"] / (n_cases + 4 + len(pts))],
        [f"exact classify ({len(pts)} points)", t_cls["best_s"], t_cls["median_s"], 1e3 * t_cls["best_s"] / len(pts)],
    ])
    C.warn_if_contended(t_exact, t_lp, t_cls)
    print(f"\ncases: {n_cases} ({n_feasible} feasible); LP agrees on cases: {agree_cases}, Table 2: {agree_table}, "
          f"points: {agree_points}")
    if not (agree_cases and agree_table and agree_points):
        raise SystemExit("linprog and the exact solver disagree")
    return {"benchmark": "abcd", "machine": info,
            "params": {"systems": len(SYSTEMS), "cases": n_cases, "feasible_cases": n_feasible, "points": len(pts)},
            "exact_solve": C.stats(t_exact), "lp_cross_check": C.stats(t_lp), "exact_classify": C.stats(t_cls),
            "agree": True}


if __name__ == "__main__":
    C.main(run)
