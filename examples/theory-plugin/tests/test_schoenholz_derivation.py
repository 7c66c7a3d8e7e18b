"""The derivation's steps against SymPy integrating the Gaussian integrals itself, for concrete activations
(polynomials and x exp(-x^2/2), whose integrals SymPy does in closed form): the Stein-lemma slopes equal the
derivatives of the integrated maps, the critical line solves both of its equations, and xi is the decay length of
the linearised recursion."""
import sympy as sp

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


def test_length_slope_is_the_derivative_of_the_integrated_map():
    sw = D.sigma_w2
    for phi in ACTIVATIONS:
        at = lambda e: e.subs(x, sp.sqrt(q) * z1)  # noqa: E731
        length = sw * gauss(at(phi**2), z1)
        direct = sp.diff(length, q)
        stein = D.length_slope().subs({D.dphi_sq: gauss(at(sp.diff(phi, x) ** 2), z1),
                                       D.ddphi_phi: gauss(at(sp.diff(phi, x, 2) * phi), z1)})
        assert sp.simplify(direct - stein) == 0, phi


def test_correlation_slope_is_the_derivative_of_the_integrated_map():
    sw = D.sigma_w2
    for phi in ACTIVATIONS[:2]:  # polynomials: SymPy integrates the 2-D Gaussian moments exactly
        ua, ub = sp.sqrt(q) * z1, sp.sqrt(q) * (c * z1 + sp.sqrt(1 - c**2) * z2)
        corr = (sw * gauss(phi.subs(x, ua) * phi.subs(x, ub), z1, z2) + D.sigma_b2) / q
        direct = sp.diff(corr, c)
        dphi = sp.diff(phi, x)
        slope = D.correlation_slope().subs(D.dphi_ab, gauss(dphi.subs(x, ua) * dphi.subs(x, ub), z1, z2))
        assert sp.simplify(direct - slope) == 0, phi
        # chi_1 is the slope at c = 1
        chi1 = D.chi_1().subs(D.dphi_sq, gauss(dphi.subs(x, ua) ** 2, z1))
        assert sp.simplify(direct.subs(c, 1) - chi1) == 0, phi


def test_critical_line_solves_the_fixed_point_and_chi1_equal_one():
    sw, sb = D.critical_line()
    assert sp.simplify(D.length_map().subs({D.sigma_w2: sw, D.sigma_b2: sb}) - D.q_star) == 0
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


def test_derivation_declares_every_result():
    dv = D.derive_schoenholz()
    assert dv.names() == ["length_map", "covariance_map", "correlation_map", "chi_1", "chi_q", "chi_c", "xi_q",
                          "xi_c", "xi_c_near_critical", "critical_sigma_w2", "critical_sigma_b2"]
    assert all(r.statement and r.source.equation for r in dv.results)
