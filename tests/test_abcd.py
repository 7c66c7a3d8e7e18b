"""abcd parameterisations (Innocenti, Achour & Bogacz 2025): exact solution, Table 2, LP cross-check, PC rates."""
import json
import random
from fractions import Fraction

import numpy as np
import pytest
import sympy as sp

from resprop.derive.theories import abcd as A
from resprop.numeric.engine.validation import ParameterError
from resprop.numeric.theories.abcd import abcd as M

HALF = sp.Rational(1, 2)
F = Fraction


def test_growth_exponent_power_counting():
    N, d = A.N, A.d
    assert A.growth_exponent(N**3 * (1 + N**(-2 * d))**-2) == 3 - 2 * sp.Max(0, -2 * d)
    assert A.growth_exponent(7 * N**HALF / N**2) == -sp.Rational(3, 2)
    assert A.growth_exponent(sp.Integer(5)) == 0


# --------------------------------------------------------------------------- the exact solution
@pytest.mark.parametrize("alg", A.ALGORITHMS)
def test_family_is_eq15_with_d_half(alg):
    """D1-D3 (paper reading) solve to eq. 15 with d = 1/2, one free parameter c, identical for BP and PC (Thm 1)."""
    (piece,) = A.solution(alg, "paper", A.WIDTH_DESIDERATA)
    assert piece.free == (A.c,) and piece.inequalities == ()
    fam = A.eq15_family(alg)
    c = A.c
    assert fam == {A.a1: -c / 2, A.b1: c, A.a: (1 - c) / 2, A.b: c, A.c: c, A.d: HALF}
    for rel in (2 * A.a + A.b - 1, 2 * A.a1 + A.b1, 2 * A.a + A.c - 1, 2 * A.a1 + A.c, A.d - HALF):  # eq. 15
        assert sp.simplify(rel.xreplace(fam)) == 0
    # mean-field is c = 0 and muP c = 1 (Table 2)
    for name, cv in (("mean-field", 0), ("muP", 1)):
        assert {str(k): v.subs(c, cv) for k, v in fam.items()} == \
            {str(k): A.TABLE2[name][key] for key, k in A.KEYS.items()}


def test_d2_alone_reproduces_eqs_66_67_and_r_never_binds():
    """PC's D2 alone: c + 2a_1 = min(0, 2d) and c + 2a_l - 1 = min(0, 2d); eq. 73's r term never binds."""
    pieces = A.solution("pc", "paper", (2,))
    assert len(pieces) == 2
    for p in pieces:
        for cv, av in ((F(-3), F(1, 3)), (F(1, 7), F(-2))):
            free = {v: sp.Rational(x) for v, x in zip((A.c, A.a), (cv, av)) if v in p.free}
            sub = {v: e.xreplace(free) for v, e in p.solution.items()}
            point = {**free, **sub}
            if not all(bool(r.xreplace(point)) for r in p.inequalities if r.free_symbols <= set(point)):
                continue
            dmin = sp.Min(0, 2 * point.get(A.d, A.d))
            if point.get(A.d, A.d).free_symbols:
                continue
            assert point[A.c] + 2 * point[A.a1] == dmin
            assert point[A.c] + 2 * point[A.a] - 1 == dmin
    # BP: eq. 15's two D2 equalities, d free
    (bp,) = A.solution("bp", "paper", (2,))
    assert bp.solution == {A.a1: -A.c / 2, A.a: HALF - A.c / 2}


def test_pc_terms_never_dominate():
    """r - q = D - e = -d - max(0, -2d) <= 0 for every d (paper's counting): the PC terms can never bind."""
    W = A.width_terms("pc")
    for big, small in (("r_hidden", "q_hidden"), ("D_hidden", "e_hidden")):
        gap = sp.simplify(W[big].exponent - W[small].exponent)
        assert sp.simplify(gap - (-A.d - sp.Max(0, -2 * A.d))) == 0
        pieces = A.solve_system([sp.Gt(gap, 0)], (A.d,))
        assert not any(p.feasible for p in pieces)


def test_boxed_eqs_73_94_as_equalities_are_inconsistent():
    """Discrepancies 1-2: eqs. 73 and 94 cannot hold as equalities alongside eq. 66 (and eq. 83)."""
    c, a, a1, d = A.c, A.a, A.a1, A.d
    mn = -sp.Max(0, -2 * d)  # min(0, 2d)
    eq66, eq67 = sp.Eq(c + 2 * a - 1, mn), sp.Eq(c + 2 * a1, mn)
    eq73, eq83 = sp.Eq(c + d + 2 * a - 1, mn), sp.Eq(c + 2 * a1 - d + HALF, mn)
    eq94 = sp.Eq(c + 2 * a - HALF, mn)
    sols = [p for p in A.solve_system([eq66, eq73], A.WIDTH_VARS) if p.feasible]
    assert sols and all(p.solution[d] == 0 for p in sols)  # eq. 73 with eq. 66 forces d = 0
    assert not any(p.feasible for p in A.solve_system([eq66, eq67, eq73, eq83], A.WIDTH_VARS))
    assert not any(p.feasible for p in A.solve_system([eq66, eq94], A.WIDTH_VARS))


def test_literal_reading_is_wider():
    """Discrepancy 5: read literally, D3 admits lazy hidden layers: c + 2a_l >= 1, two free parameters."""
    for alg in A.ALGORITHMS:
        (p,) = A.solution(alg, "literal", A.WIDTH_DESIDERATA)
        assert set(p.free) == {A.a, A.c}
        assert p.solution == {A.a1: -A.c / 2, A.b1: A.c, A.b: 1 - 2 * A.a, A.d: HALF}
        assert [str(r) for r in p.inequalities] == ["2*a_l + c >= 1"]


def test_depth_alpha():
    """D4 alone: alpha >= 1/2 (eq. 103); D5 alone: alpha = 1/2 (eq. 124); PC needs nu >= 1 as well."""
    for alg in A.ALGORITHMS:
        (p4,) = A.solution(alg, "paper", (4,))
        assert sp.Interval(HALF, sp.oo) == sp.reduce_inequalities(
            [r for r in p4.inequalities if A.alpha in r.free_symbols], A.alpha).as_set()
    (p5,) = A.solution("bp", "paper", (5,))
    assert p5.solution == {A.alpha: HALF}
    (pc45,) = A.solution("pc", "paper", (4, 5))
    assert pc45.solution == {A.alpha: HALF} and pc45.interval == sp.Interval(1, sp.oo)
    pc5 = A.solution("pc", "paper", (5,))
    assert {str(p.solution[A.alpha]) for p in pc5} == {"1/2", "nu/2"}
    (lit,) = A.solution("bp", "literal", (5,))
    assert lit.interval == sp.Interval(HALF, sp.oo)  # literal D5: alpha >= 1/2
    mf = A.TABLE2["mean-field"]
    assert A.classify(mf, F(1, 2), F(1, 2))["pc"][5] is False  # L = N^2: 1/s ~ N/L kills PC's updates
    assert A.classify(mf, F(1, 2), F(1, 2))["bp"][5] is True
    assert A.classify(mf, F(1, 2), F(1))["pc"][5] is True
    assert A.classify(mf, F(1, 2))["pc"] == {1: True, 2: True, 3: True, 4: True, 5: True}
    assert A.classify(mf, F(1))["bp"][4] is True and A.classify(mf, F(1))["bp"][5] is False
    assert A.classify(mf, F(1), reading="literal")["bp"][5] is True


# --------------------------------------------------------------------------- Table 2
OURS = {
    "SP": {1: True, 2: False, 3: False},
    "NTK": {1: True, 2: True, 3: False},
    "mean-field": {1: True, 2: True, 3: True},
    "muP": {1: True, 2: True, 3: True},
}


@pytest.mark.parametrize("name", list(A.TABLE2))
def test_table2_classification(name):
    """Table 2 desideratum by desideratum, BP and PC alike.

    Pins the derivation, not §2.3's prose: the paper says the SP has "evolving features"; with Table 2's
    c = d = 0 the hidden features move as N^{1/2} and the first layer's as N^{-1/2}, so D3 fails.
    """
    params = A.TABLE2[name]
    for reading in A.READINGS:
        got = A.classify(params, reading=reading)
        assert got["bp"] == OURS[name] and got["pc"] == OURS[name]
    row = M.table2()["parameterisations"][name]
    assert row["agrees_with_paper"] is (name != "SP")
    if name == "SP":
        assert row["term_exponents"]["bp"]["e_hidden"] == "1/2" and row["term_exponents"]["bp"]["e_first"] == "-1/2"
        assert row["term_exponents"]["bp"]["q_hidden"] == "1"  # predictions explode as N (§2.3)
    if name == "NTK":
        assert row["term_exponents"]["pc"]["e_hidden"] == "-1/2"  # lazy


def test_pc_and_bp_differ_off_the_family():
    """d < 0: PC's growing rescaling s ~ N^{-2d} rescues D2 and breaks D3; only the joint set is shared."""
    p = {"a1": F(0), "b1": F(0), "a": F(1, 2), "b": F(0), "c": F(-1), "d": F(-1, 2)}
    got = A.classify(p)
    assert got["bp"] == {1: True, 2: False, 3: True}
    assert got["pc"] == {1: True, 2: True, 3: False}


# --------------------------------------------------------------------------- LP cross-check
@pytest.mark.parametrize("alg", A.ALGORITHMS)
@pytest.mark.parametrize("reading", A.READINGS)
def test_lp_agrees_on_every_case(alg, reading):
    for numbers in (A.WIDTH_DESIDERATA, A.DEPTH_DESIDERATA, (1,), (2,), (3,), (4,), (5,)):
        rows = A.lp_cross_check_cases(alg, reading, numbers)
        assert rows and all(r["agree"] for r in rows), (numbers, rows)
        assert any(r["exact"] for r in rows)


def test_lp_agrees_on_table2():
    for params in A.TABLE2.values():
        for al, nu in ((None, None), (F(0), None), (F(1, 2), None), (F(1), F(2)), (F(1, 2), F(1, 2))):
            for reading in A.READINGS:
                assert A.lp_classify(params, al, nu, reading) == A.classify(params, al, nu, reading)


def _random_points(n: int, seed: int = 20250101):
    rng = random.Random(seed)
    grid = [F(k, 2) for k in range(-2, 3)] + [F(1, 4), F(-3, 4)]
    pts = []
    for i in range(n):
        if i % 3 == 0:  # on the eq.-15 family, sometimes perturbed in one exponent
            cv = F(rng.randint(-8, 8), rng.choice([1, 2, 3, 4]))
            p = {"a1": -cv / 2, "b1": cv, "a": (1 - cv) / 2, "b": cv, "c": cv, "d": F(1, 2)}
            if rng.random() < 0.5:
                p[rng.choice(M.REQUIRED)] += rng.choice([F(-1, 2), F(1, 4), F(1)])
        else:
            p = {k: rng.choice(grid) for k in M.REQUIRED}
        al = rng.choice([None, F(0), F(1, 4), F(1, 2), F(1), F(rng.randint(-4, 8), 4)])
        nu = rng.choice([None, F(1, 2), F(1), F(3, 2)]) if al is not None else None
        pts.append((p, al, nu))
    return pts


def test_lp_agrees_on_random_rational_points():
    """~200 seeded rational parameterisations: linprog and exact arithmetic give the same verdicts."""
    seen = {alg: {k: set() for k in range(1, 6)} for alg in A.ALGORITHMS}
    for i, (p, al, nu) in enumerate(_random_points(200)):
        reading = "literal" if i % 5 == 0 else "paper"
        exact = A.classify(p, al, nu, reading)
        assert A.lp_classify(p, al, nu, reading) == exact, (p, al, nu, reading)
        for alg, ds in exact.items():
            for k, v in ds.items():
                seen[alg][k].add(v)
    assert all(s == {True, False} for alg in seen for s in seen[alg].values())  # both verdicts exercised


def test_classify_agrees_with_solution_family():
    """A point meets D1-D3 exactly when it lies on the solved family."""
    for p, _, _ in _random_points(60, seed=7):
        on = p["d"] == F(1, 2) and p["a1"] == -p["c"] / 2 and p["b1"] == p["c"] and p["a"] == (1 - p["c"]) / 2 \
            and p["b"] == p["c"]
        for alg in A.ALGORITHMS:
            assert all(A.classify(p)[alg].values()) is on


# --------------------------------------------------------------------------- PC-specific rates
def test_pc_rates_symbolic():
    """On the family: r and the D-term Theta(N^-1/2) (paper's counting), the depth term L/N^2 at alpha = 1/2."""
    fam = A.eq15_family()
    W = A.width_terms("pc")
    branch = {sp.Max(0, -2 * A.d): 0}
    for key in ("r_hidden", "D_hidden"):
        assert W[key].exponent.xreplace(fam) == -HALF
        assert W[key].exponent.xreplace(branch).xreplace(fam) == -HALF
    assert W["q_hidden"].exponent.xreplace(fam) == 0 and W["e_hidden"].exponent.xreplace(fam) == 0
    D = A.depth_terms("pc")
    # alpha = 1/2, N = L^nu with nu >= 1 (s -> const): exponent 1 - 2 nu in L, i.e. Theta(L / N^2)
    e = D["residual_pc"].exponent.xreplace({A.alpha: HALF})
    assert e.xreplace({sp.Max(0, 1 - A.nu): 0}) == 1 - 2 * A.nu
    sharp = {st: {k: v.xreplace(fam) for k, v in A.sharp_pc_exponents(st).items()} for st in ("init", "aligned")}
    assert sharp == {"init": {"r_hidden": -3 * HALF, "D_hidden": -3 * HALF},
                     "aligned": {"r_hidden": -1, "D_hidden": -1}}


def test_pc_rates_generated_kernels():
    import resprop.numeric.theories.abcd.generated.abcd as G

    N = np.logspace(2, 6, 9)
    assert M.loglog_slope(N, G.pc_r_scale(N, 3.0, 1.0)) == pytest.approx(-0.5, abs=5e-3)
    assert M.loglog_slope(N, G.pc_D_scale(N)) == pytest.approx(-0.5, abs=5e-3)
    assert M.loglog_slope(N * 10, G.pc_depth_term_alpha_half(N * 10, 10.0)) == pytest.approx(-2, abs=5e-3)
    Ls = np.array([4.0, 8, 16, 32, 64])
    assert M.loglog_slope(Ls, G.pc_depth_term_alpha_half(1e9, Ls)) == pytest.approx(1, abs=1e-3)
    res = M.rates(N, depth=1)  # depth 1: the paper's L = 3, the kernels' argument above
    np.testing.assert_array_equal(res["r"], G.pc_r_scale(N, 3.0, 1.0))
    assert res["depth"] == 1 and res["L"] == 3
    assert res["slope_r"] == pytest.approx(-0.5, abs=5e-3) and res["slope_D"] == pytest.approx(-0.5, abs=5e-3)
    # Desideratum 4: (1 + L^-2alpha)^(L-2) is bounded (-> e) at alpha = 1/2, explodes below, -> 1 above
    L = np.array([10.0, 100, 1000, 10000])
    assert np.all(np.diff(G.residual_variance_factor(0.5, L)) > 0) and G.residual_variance_factor(0.5, 1e4) < np.e
    assert G.residual_variance_factor(0.5, 1e4) == pytest.approx(np.e, rel=1e-3)
    assert G.residual_variance_factor(0.25, 1e4) > 1e40
    assert G.residual_variance_factor(1.0, 1e4) == pytest.approx(1, abs=1e-3)
    assert G.family_a_l(np.array([0.0, 1.0])).tolist() == [0.5, 0.0] and G.family_d() == 0.5


def test_pc_terms_monte_carlo():
    """Discrepancy 3: in a linear MLP r and the D-term vanish faster than the paper's N^-1/2 bound."""
    widths = [128, 256, 512, 1024, 2048]
    init = M.mlp_pc_terms(widths, seeds=4)["slopes"]
    assert init["r"] == pytest.approx(-1.5, abs=0.2) and init["D"] == pytest.approx(-1.5, abs=0.2)
    assert abs(init["q"]) < 0.15 and abs(init["bp_feature"]) < 0.15  # D2, D3: Theta(1)
    assert init["s_minus_1"] == pytest.approx(-1, abs=0.1)  # eq. 16
    aligned = M.mlp_pc_terms(widths, seeds=4, samples=2, aligned=True)["slopes"]
    assert aligned["r"] == pytest.approx(-1, abs=0.2) and aligned["D"] == pytest.approx(-1, abs=0.2)
    assert abs(aligned["q"]) < 0.15 and abs(aligned["f"]) < 0.15
    assert max(init["r"], init["D"], aligned["r"], aligned["D"]) < -0.5 - 0.25


# --------------------------------------------------------------------------- numeric / CLI layer
def test_check_format_and_cli(capsys):
    out = M.check(["a1=0", "b1=0", "a=0.5", "b=0", "c=0", "d=0.5"])
    assert out.to_dict() == {"bp": {"1": True, "2": True, "3": True}, "pc": {"1": True, "2": True, "3": True}}
    out = M.check("a1=0 b1=0 a=1/2 b=0 c=0 d=1/2 alpha=0.5".split())
    assert out["pc"] == {str(k): True for k in range(1, 6)}
    assert M.check("a_1=0 b_1=0 a_l=0 bL=1 c=0 d=0 alpha=0".split())["bp"] == \
        {"1": True, "2": False, "3": False, "4": False, "5": False}
    assert M.cli_abcd(["a1=0", "b1=0", "a=1/2", "b=0", "c=0", "d=1/2"], as_json=True) == 0
    assert json.loads(capsys.readouterr().out)["pc"]["3"] is True
    fam = M.solution_family()
    assert fam["family"] == {"free": "c", "a1": "-c/2", "b1": "c", "a": "1/2 - c/2", "b": "c", "c": "c", "d": "1/2"}
    assert all(fam["eq15"].values()) and fam["same_for_bp_and_pc"]
    assert fam["depth"]["D4"] == "alpha >= 1/2" and fam["depth"]["D5"] == "alpha = 1/2"
    assert fam["pc_rates"]["r_exponent_on_family"] == "-1/2"
    json.dumps({"solution_family": fam.to_dict(), "table2": M.table2().to_dict()})
    details = M.check_details("a1=0 b1=0 a=1/2 b=0 c=0 d=1/2".split())
    assert details["verdicts"] == details["lp_verdicts"]


@pytest.mark.parametrize("assignments, parameter", [
    (["a1=0", "b1=0", "a=1/2", "b=0", "c=0"], "d"),  # missing
    (["a1=0", "b1=0", "a=1/2", "b=0", "c=0", "d=1/2", "e=1"], "e"),  # unknown key
    (["a1=0", "b1=0", "a=half", "b=0", "c=0", "d=1/2"], "a"),  # non-numeric
    (["a1=0", "b1=0", "a=1/2", "b=0", "c=0", "d=nan"], "d"),
    (["a1=0", "b1=0", "a=1/2", "b=0", "c=1/0", "d=1/2"], "c"),
    (["a1=0", "b1=0", "a=1/2", "aL=0", "b=0", "c=0", "d=1/2"], "a"),  # inconsistent aliases
    (["a1=0", "a1=1", "b1=0", "a=1/2", "b=0", "c=0", "d=1/2"], "a1"),  # inconsistent duplicates
    (["a1=0", "b1=0", "a=1/2", "b=0", "c=0", "d=1/2", "alpha=1/2", "nu=0"], "nu"),
    (["a1=0", "b1=0", "a=1/2", "b=0", "c=0", "d=1/2", "nu=1"], "nu"),  # nu without alpha
    (["a1", "b1=0"], "assignments (--check)"),
])
def test_bad_assignments(assignments, parameter):
    with pytest.raises(ParameterError) as exc:
        M.check(assignments)
    assert exc.value.parameter == parameter


def test_bad_numeric_inputs():
    for widths in ([0.5, 10], [], ["x"], [float("inf")]):
        with pytest.raises(ParameterError) as exc:
            M.rates(widths)
        assert exc.value.parameter == "widths (N)"
    with pytest.raises(ParameterError) as exc:
        M.rates([10, 100], depth=-1)  # depth counts layers after the read-in: >= 0 (L = depth + 2 >= 2)
    assert exc.value.parameter == "depth" and ">= 0" in str(exc.value)
    with pytest.raises(ParameterError, match="gamma0"):
        M.rates([10, 100], gamma0=-1)
    with pytest.raises(ParameterError, match="N"):
        M.mlp_pc_terms([0, 10])
    with pytest.raises(ParameterError, match="reading"):
        M.check("a1=0 b1=0 a=1/2 b=0 c=0 d=1/2".split(), reading="loose")
