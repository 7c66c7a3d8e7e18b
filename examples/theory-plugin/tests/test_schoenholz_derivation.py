"""The derivation's steps against SymPy integrating the Gaussian integrals itself, for concrete activations
(polynomials and x exp(-x^2/2), whose integrals SymPy does in closed form): the symbolic maps and their Price
slopes equal the integrated maps and their derivatives, Price's theorem equals Stein's lemma (and the check that
says so can fail), the critical line solves both of its equations, xi is the decay length of the linearised
recursion, and the resolved per-activation results are the textbook closed forms."""
import pytest
import sympy as sp

from resprop.derive.expectation import GaussianMean, GaussianMean2, TabulatedMean, TabulatedMean2, resolve
from resprop_schoenholz import derivation as D

z1, z2 = sp.symbols("z_1 z_2", real=True)
x = sp.Symbol("x", real=True)
q, c = sp.symbols("q c", positive=True)
ACTIVATIONS = [x + x**3 / 3, x - x**2 / 5 + x**3 / 7, x * sp.exp(-x**2 / 2)]


def gauss(f, *vars_):
    """<f> over independent standard normals ``vars_``: a polynomial by its moments <v^n> = (n - 1)!! (n even),
    anything else integrated by SymPy."""
    f = sp.expand(f)
    if f.is_polynomial(*vars_):
        poly = sp.Poly(f, *vars_)
        moment = lambda n: 0 if n % 2 else sp.factorial2(n - 1)  # noqa: E731
        return sp.simplify(sum(coeff * sp.Mul(*[moment(n) for n in powers]) for powers, coeff in poly.terms()))
    for v in vars_:
        f = sp.integrate(f * sp.exp(-v**2 / 2) / sp.sqrt(2 * sp.pi), (v, -sp.oo, sp.oo))
    return sp.simplify(f)


def integrated(expr, act):
    """``expr`` with phi = ``act`` and every expectation integrated over standard normals by :func:`gauss`: <f(z)>_K
    with z = sqrt(K) z_1, <f(u, v)> with u = sqrt(K_aa) z_1, v = (K_ab z_1 + sqrt(K_aa K_bb - K_ab^2) z_2) /
    sqrt(K_aa) (not resprop's resolve)."""
    def value(node):
        f = node.args[0]
        body = f.expr.subs(D.phi, sp.Lambda(x, act)).doit()
        if isinstance(node, GaussianMean):
            (w,), K = f.variables, node.args[1]
            return gauss(body.subs(w, sp.sqrt(K) * z1), z1)
        (a, b), (Kaa, Kbb, Kab) = f.variables, node.args[1:]
        ua = sp.sqrt(Kaa) * z1
        ub = (Kab * z1 + sp.sqrt(Kaa * Kbb - Kab**2) * z2) / sp.sqrt(Kaa)
        return gauss(body.subs({a: ua, b: ub}, simultaneous=True), z1, z2)
    return expr.replace(lambda e: isinstance(e, (GaussianMean, GaussianMean2)), value)


def test_length_slope_is_the_derivative_of_the_integrated_map():
    for phi in ACTIVATIONS:
        length = integrated(D.length_map(q), phi)
        price = integrated(D.length_slope(), phi)  # sigma_w^2 <phi'^2 + phi phi''>_{q*}
        assert sp.simplify(sp.diff(length, q).subs(q, D.q_star) - price) == 0, phi


def test_correlation_slope_is_the_derivative_of_the_integrated_map():
    for phi in ACTIVATIONS[:2]:  # polynomials: SymPy integrates the 2-D Gaussian moments exactly
        corr = integrated(D.correlation_map(), phi)
        direct = sp.diff(corr, D.c)
        assert sp.simplify(direct - integrated(D.correlation_slope(), phi)) == 0, phi
        # chi_1 is the slope at c = 1, a one-point expectation
        assert D.chi_1().atoms(GaussianMean2) == set()
        assert sp.simplify(direct.subs(D.c, 1) - integrated(D.chi_1(), phi)) == 0, phi


def test_the_maps_are_the_integrated_maps_of_the_paper():
    """A polynomial activation, by hand: <(u + u^3/3)(v + v^3/3)> by Isserlis' theorem."""
    phi = x + x**3 / 3
    Kaa, Kbb, Kab = D.q_aa, D.q_bb, D.q_ab
    isserlis = Kab + (3 * Kaa * Kab + 3 * Kbb * Kab) / 3 + (9 * Kaa * Kbb * Kab + 6 * Kab**3) / 9
    assert sp.expand(integrated(D.covariance_map(), phi) - (D.sigma_w2 * isserlis + D.sigma_b2)) == 0
    moments = q + 2 * 3 * q**2 / 3 + 15 * q**3 / 9  # <z^2> + 2 <z^4>/3 + <z^6>/9
    assert sp.expand(integrated(D.length_map(q), phi) - (D.sigma_w2 * moments + D.sigma_b2)) == 0


def test_price_equals_stein_and_the_check_can_fail(monkeypatch):
    slopes = D.price_equals_stein()
    assert slopes == {"chi_q": D.sigma_w2 * (D.dphi_sq + D.ddphi_phi), "chi_c": D.sigma_w2 * D.dphi_ab,
                      "chi_1": D.sigma_w2 * D.dphi_sq}
    assert sp.simplify(D.stein_length_slope() - slopes["chi_q"]) == 0
    # a slope without the phi phi'' term (Stein's lemma forgotten) is caught
    monkeypatch.setattr(D, "length_slope", lambda: D.sigma_w2 * D.mean(sp.diff(D.phi(D.z), D.z) ** 2, D.q_star))
    with pytest.raises(ArithmeticError, match="chi_q"):
        D.price_equals_stein()


def test_as_inputs_gives_the_generic_kernels_and_names_what_it_cannot():
    assert D.as_inputs(D.length_map()) == D.sigma_w2 * D.phi_sq + D.sigma_b2
    assert D.as_inputs(D.correlation_map()) == (D.sigma_w2 * D.phi_ab + D.sigma_b2) / D.q_star
    sw, sb = D.critical_line()
    assert D.as_inputs(sw) == 1 / D.dphi_sq and D.as_inputs(sb) == D.q_star - D.phi_sq / D.dphi_sq
    with pytest.raises(ArithmeticError, match="phi"):
        D.as_inputs(D.mean(D.phi(D.z) ** 4, D.q))


def test_critical_line_solves_the_fixed_point_and_chi1_equal_one():
    sw, sb = D.critical_line()
    assert sp.simplify(D.length_map(D.q_star).subs({D.sigma_w2: sw, D.sigma_b2: sb}) - D.q_star) == 0
    assert sp.simplify(D.chi_1().subs(D.sigma_w2, sw) - 1) == 0


def test_depth_scale_is_the_decay_length_of_the_linear_recursion():
    chi = sp.Rational(3, 5)
    xi = D.depth_scale().subs(sp.Symbol("chi", positive=True), chi)
    eps = [sp.Integer(1)]
    for _ in range(7):
        eps.append(chi * eps[-1])
    for layer, e in enumerate(eps):
        assert sp.simplify(e - sp.exp(-layer / xi)) == 0
    # the near-critical series: -1/log(chi) - (1/(1 - chi) - 1/2) = O(1 - chi)
    for d in (sp.Rational(1, 100), sp.Rational(1, 1000)):
        exact = -1 / sp.log(1 - d)
        approx = D.near_critical().subs(sp.Symbol("chi", positive=True), 1 - d)
        assert abs(float(exact - approx)) < d  # the next term is -d/12


def test_resolved_results_are_the_textbook_closed_forms():
    """erf: Williams (1997) <erf(u) erf(v)> = (2/pi) asin(2 K_ab / sqrt((1 + 2 K_aa)(1 + 2 K_bb))), <erf'^2>_q =
    4 / (pi sqrt(1 + 4 q)); ReLU: Cho & Saul (2009) arc-cosine kernels, <phi^2>_q = q/2, chi_1 = sigma_w^2 / 2;
    tanh: the engine's quadrature."""
    dv = D.derive_schoenholz()
    sw, sb, qs, cc = D.sigma_w2, D.sigma_b2, D.q_star, D.c
    williams = 2 / sp.pi * sp.asin(2 * D.q_ab / sp.sqrt((1 + 2 * D.q_aa) * (1 + 2 * D.q_bb)))
    assert sp.simplify(dv["covariance_map_erf"].expr - (sw * williams + sb)) == 0
    assert sp.simplify(dv["chi_1_erf"].expr - 4 * sw / (sp.pi * sp.sqrt(1 + 4 * qs))) == 0
    assert dv["length_map_relu"].expr == sw * D.q / 2 + sb and dv["chi_1_relu"].expr == sw / 2
    assert dv["critical_sigma_w2_relu"].expr == 2 and dv["critical_sigma_b2_relu"].expr == 0
    assert sp.simplify(dv["chi_c_relu"].expr - (sw * (sp.pi - sp.acos(cc)) / (2 * sp.pi)).rewrite(sp.asin)) == 0
    tanh = [n for n in dv.names() if n.endswith("_tanh")]
    assert tanh and all(dv[n].expr.has(TabulatedMean, TabulatedMean2) for n in tanh)
    assert not any(dv[n].expr.has(TabulatedMean, TabulatedMean2) for n in dv.names() if not n.endswith("_tanh"))
    # the per-activation results are the symbolic ones resolved (GELU's with its 1/pi terms collected)
    assert sp.simplify(dv["chi_q_gelu"].expr - resolve(D.length_slope(), "gelu")) == 0


def test_derivation_declares_every_result():
    dv = D.derive_schoenholz()
    generic = ["length_map", "covariance_map", "correlation_map", "chi_1", "chi_q", "chi_c", "xi_q", "xi_c",
               "xi_c_near_critical", "critical_sigma_w2", "critical_sigma_b2"]
    per = [f"{r}_{a}" for r in ("length_map", "covariance_map", "correlation_map", "chi_1", "chi_q", "chi_c",
                                 "critical_sigma_w2", "critical_sigma_b2") for a in D.ACTIVATIONS]
    assert dv.names() == generic + per
    assert all(r.statement and r.source.equation for r in dv.results)
    assert not any(r.expr.has(GaussianMean, GaussianMean2) for r in dv.results)  # every expectation resolved
