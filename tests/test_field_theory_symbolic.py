"""Field theory derived in SymPy: saddle point, Hessian blocks, propagator, response, rho*, max entropy."""
import mpmath as mp
import numpy as np
import pytest
import sympy as sp

from resprop.derive.theories import fischer as FT


@pytest.fixture(scope="module")
def action3():
    return FT.build_action(3, inputs=1)


def test_saddle_point_is_nngp_recursion(action3):
    sol = FT.saddle_point(action3)
    C = [c[0] for c in action3.C]
    F = action3.F["aa"]
    assert sp.simplify(sol[C[2]] - FT.rho**2 * (FT.sigma_w2 * F(C[0] + C[1]) + FT.sigma_b2)) == 0
    assert sp.simplify(sol[C[4]] - (FT.sigma_w2_out * F(C[0] + C[1] + C[2] + C[3]) + FT.sigma_b2_out)) == 0
    assert FT.conjugate_saddle_vanishes(action3)


def test_hessian_structure(action3):
    S_CC, S_tC, S_tt = FT.hessian_blocks(action3)
    assert S_CC == sp.zeros(*S_CC.shape)  # eq. 34
    assert S_tC.is_lower  # forward-only propagation (37): 1_{k>l}
    assert all(S_tt[0, k] == 0 for k in range(S_tt.shape[1]))  # the input kernel does not fluctuate


def test_propagator_inverts_hessian():
    assert FT.check_propagator(FT.build_action(2, inputs=1)) == sp.zeros(8, 8)


@pytest.mark.parametrize("L", [1, 2, 3])
def test_eta_field_theory_equals_linear_response_diagonal(L):
    """N G_{CC~}^{l0} (44) equals dC^(l)/dK^(0) (51) up to the normalisation eta^(0) = N/d_in."""
    act = FT.build_action(L, inputs=1)
    eta_ft = FT.response_from_propagator(act, "aa")
    eta_lr = FT.response_by_linear_response(L, "aa")
    C = [c[0] for c in act.C]
    k0 = sp.Symbol("k0_aa")
    # express the field-theory result through the same variables: C^(l) at the saddle as functions of k0
    sol = FT.saddle_point(act)
    chain = {C[0]: k0}
    for l in range(1, L + 2):
        chain[C[l]] = sol[C[l]].subs(chain)
    for a, b in zip(eta_ft, eta_lr):
        assert sp.simplify((a.subs(chain).doit() * FT.d_in / FT.N) - b.doit()) == 0


def test_eta_offdiagonal_two_routes():
    act = FT.build_action(2, inputs=2)
    ratio_ft = FT.response_update_from_propagator(act, "ab")
    eta_lr = FT.response_by_linear_response(2, "ab")
    # linear-response ratios eta^(l)/sum_{k<l} eta^(k) evaluated with the same placeholder
    ratio_lr = [sp.simplify(eta_lr[l] / sum(eta_lr[:l])) for l in range(1, 4)]
    g = sp.Symbol("g")
    rep = lambda e: e.doit().replace(lambda x: isinstance(x, (sp.Derivative, sp.Subs)), lambda x: g)  # noqa: E731
    assert [sp.simplify(rep(r)) for r in ratio_ft] == [sp.simplify(rep(r)) for r in ratio_lr]
    assert sp.simplify(rep(ratio_ft[0]) - FT.rho**2 * FT.sigma_w2 * g) == 0


def test_eta0_field_normalisation(action3):
    assert sp.simplify(FT.response_from_propagator(action3)[0] - FT.N / FT.d_in) == 0


def test_fluctuations_leading_order(action3):
    """G_CC of C^(1) = (rho^2 sigma_w^2)^2 Var[phi^2]/N (one layer of N iid neurons)."""
    G = FT.kernel_fluctuations(action3)
    kappa = sp.Function("kappa")
    expected = (FT.rho**2 * FT.sigma_w2) ** 2 * kappa(sp.Symbol("aa0"), sp.Symbol("aa0")) / FT.N
    assert sp.simplify(G[1, 1] - expected) == 0
    assert G[0, 0] == 0


def test_linearised_kernel_against_iteration():
    expr = FT.linearised_kernel()
    vals = {FT.rho: 0.3, FT.sigma_w2: 1.25, FT.sigma_b2: 0.05, FT.dphi0_sq: 4 / np.pi, FT.K0: 0.05}
    K = 0.05
    a = 0.09 * 1.25 * 4 / np.pi
    for _ in range(17):
        K = (1 + a) * K + 0.09 * 0.05
    assert abs(float(expr.subs({**vals, FT.depth: 17})) - K) < 1e-12 * K


def test_rho_star_linearised_solves_target():
    r = FT.rho_star_linearised()
    vals = {FT.depth: 40, FT.sigma_w2: sp.Rational(5, 4), FT.sigma_b2: sp.Rational(1, 20), FT.dphi0_sq: 4 / sp.pi, FT.K0: sp.Rational(1, 20),
            FT.target_variance: sp.Rational(1, 2)}
    rs = r.subs(vals)
    KL = FT.linearised_kernel().subs(vals).subs(FT.rho, rs)
    assert abs(sp.N(KL - sp.Rational(1, 2), 30)) < 1e-25


def test_large_depth_form_is_leading_order():
    vals = {FT.sigma_w2: 1.25, FT.sigma_b2: 0.05, FT.dphi0_sq: 4 / sp.pi, FT.K0: sp.Rational(1, 20),
            FT.target_variance: sp.Rational(1, 2)}
    rel = [abs(sp.N(FT.rho_star_large_depth().subs(vals).subs(FT.depth, L) /
                    FT.rho_star_linearised().subs(vals).subs(FT.depth, L) - 1)) for L in (10, 100, 1000)]
    assert rel[0] > rel[1] > rel[2] and rel[2] < 1e-3
    assert 8 < rel[1] / rel[2] < 12  # relative correction O(1/L)


def test_max_entropy_variance_is_one_half_not_one_quarter():
    """Documented finding: E4 is right, but its minimiser is sigma^2 = 1/2 (erf(h) exactly uniform there);
    the paper's E5 differentiates (1/2) ln sigma^2 to 1/sigma^2 and reports 1/4."""
    s = FT.max_entropy_variance()
    assert s == sp.Rational(1, 2)
    kl = FT.uniform_kl_erf()
    assert sp.simplify(kl.subs(FT.sigma2, s)) == 0
    assert sp.diff(kl, FT.sigma2).subs(FT.sigma2, sp.Rational(1, 4)) != 0
    # independent route: the KL by mpmath quadrature of the definition, minimised numerically (the slope by a
    # central difference at 20 digits: O(h^2) ~ 1e-12 truncation, ~1e-14 from the quadrature; mp.diff's
    # higher-precision re-evaluations of the quadrature cost 5x as much for the same answer)
    def kl_num(s2):
        def integrand(y):
            h = mp.erfinv(y)
            p = mp.exp(-h * h / (2 * s2)) / mp.sqrt(2 * mp.pi * s2) / (2 / mp.sqrt(mp.pi) * mp.exp(-h * h))
            return mp.mpf(1) / 2 * (mp.log(mp.mpf(1) / 2) - mp.log(p))
        return mp.quad(integrand, [-1, 0, 1])

    with mp.workdps(20):
        assert abs(kl_num(mp.mpf("0.3")) - FT.uniform_kl_erf().subs(FT.sigma2, 0.3)) < 1e-12
        step = mp.mpf("1e-6")
        best = mp.findroot(lambda s2: (kl_num(s2 + step) - kl_num(s2 - step)) / (2 * step), mp.mpf("0.4"))
        assert abs(best - mp.mpf(1) / 2) < 1e-8
    assert FT.erf_target_variance_check() == sp.Rational(1, 3)  # <erf^2> = 1/3 = E[U^2], U ~ U[-1, 1]


def test_action_for_three_inputs_response_structure():
    """P = 3 action (A30): the response of an off-diagonal element to its own input follows (C15), elements
    do not respond to unrelated elements, but an off-diagonal element does respond to a diagonal input
    (d<phi_a phi_b>/dK_aa = 1/2 <phi''_a phi_b> != 0): the delta_{(ab),(cd)} of C13 holds only for the
    element's own source and unrelated elements (documented finding)."""
    act = FT.build_action(1, inputs=3)
    assert act.elements == ("aa", "bb", "cc", "ab", "ac", "bc")
    assert FT.cross_response(act, "ab", "ac") == [0, 0, 0]
    assert FT.cross_response(act, "aa", "ab") == [0, 0, 0]
    assert FT.cross_response(act, "ab", "aa")[1] != 0
    g = sp.Symbol("g")
    ratio = FT.response_update_from_propagator(act, "ac")[0].doit()
    ratio = ratio.replace(lambda e: isinstance(e, (sp.Derivative, sp.Subs)), lambda e: g)
    assert sp.simplify(ratio - FT.rho**2 * FT.sigma_w2 * g) == 0
