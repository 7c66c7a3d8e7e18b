"""The generated per-activation kernels (``length_map_<act>``, ``covariance_map_<act>``, ``correlation_map_<act>``,
``chi_1_<act>``, ``chi_q_<act>``, ``chi_c_<act>``, ``critical_sigma_w2_<act>``, ``critical_sigma_b2_<act>`` for erf,
tanh, relu and gelu) against

* mpmath quadrature of the activations written here by hand (neither resprop's closed forms nor its quadrature),
* the activation-generic kernels on resprop's expectation engine (the driver's route for any other activation),
* the driver at its own fixed points (the length and correlation maps fix q* and c*, the critical line has
  chi_1 = 1 and the requested sigma_b^2).
"""
from functools import cache

import mpmath as mp
import numpy as np
import pytest

from resprop.numeric.engine import expectations
from resprop_schoenholz import driver as D

G = D.generated()
NAMED = ("erf", "tanh", "relu", "gelu")
#: phi, phi', phi'' in mpmath (ReLU: phi phi'' = x delta(x) = 0, so phi'' contributes nothing)
MP = {
    "erf": (mp.erf, lambda t: 2 / mp.sqrt(mp.pi) * mp.exp(-t * t), lambda t: -4 * t / mp.sqrt(mp.pi) * mp.exp(-t * t)),
    "tanh": (mp.tanh, lambda t: 1 / mp.cosh(t) ** 2, lambda t: -2 * mp.tanh(t) / mp.cosh(t) ** 2),
    "relu": (lambda t: max(t, 0), lambda t: mp.mpf(1) if t > 0 else mp.mpf(0), lambda t: mp.mpf(0)),
    "gelu": (lambda t: t * mp.ncdf(t), lambda t: mp.ncdf(t) + t * mp.npdf(t), lambda t: (2 - t * t) * mp.npdf(t)),
}
SW, SB = 1.7, 0.2
Q, COV, FIXED = 0.6, (0.8, 1.7, -0.5), (1.2, 0.45)  # q^(l); (q_aa, q_bb, q_ab); (q*, c)


def mean1(f, K):
    s = mp.sqrt(K)
    return mp.quad(lambda t: f(s * t) * mp.npdf(t), [-mp.inf, -6, -2, 0, 2, 6, mp.inf])


def mean2(f, g, kaa, kbb, kab, cut=9):
    """<f(u) g(v)> nested over the standard normals (t_1, t_2), u = sqrt(K_aa) t_1, v = sqrt(K_bb) (r t_1 +
    sqrt(1 - r^2) t_2): Gauss-Legendre on |t| <= 9 (the rest weighs below 1e-18), each integral split where its
    argument crosses 0 (ReLU's kink)."""
    r = kab / mp.sqrt(kaa * kbb)
    sa, sb, s = mp.sqrt(kaa), mp.sqrt(kbb), mp.sqrt(1 - r * r)

    def inner(t1):
        kink = -r * t1 / s
        points = [-cut, *([kink] if -cut < kink < cut else []), cut]
        return mp.quad(lambda t2: g(sb * (r * t1 + s * t2)) * mp.npdf(t2), points, method="gauss-legendre")
    return mp.quad(lambda t1: f(sa * t1) * inner(t1) * mp.npdf(t1), [-cut, 0, cut], method="gauss-legendre")


def call(name, **values):
    """The kernel ``name`` with the inputs its RESULTS entry lists (ReLU's chi_1 has no q_star, ...)."""
    return float(np.asarray(getattr(G, name)(*(values[k] for k in G.RESULTS[name]["inputs"]))).reshape(-1)[0])


@cache
def references(act):
    """Each kernel's value at the points above, by mpmath (15 digits)."""
    phi, dphi, ddphi = MP[act]
    qs, c = FIXED
    with mp.workdps(15):
        m_sq = lambda K: mean1(lambda t: phi(t) ** 2, K)  # noqa: E731
        d_sq = mean1(lambda t: dphi(t) ** 2, qs)
        return {
            "length_map": SW * m_sq(Q) + SB,
            "covariance_map": SW * mean2(phi, phi, *COV) + SB,
            "correlation_map": (SW * mean2(phi, phi, qs, qs, c * qs) + SB) / qs,
            "chi_1": SW * d_sq,
            "chi_q": SW * mean1(lambda t: dphi(t) ** 2 + phi(t) * ddphi(t), qs),
            "chi_c": SW * mean2(dphi, dphi, qs, qs, c * qs),
            "critical_sigma_w2": 1 / d_sq,
            "critical_sigma_b2": qs - m_sq(qs) / d_sq,
        }


def values(act, kernel):
    qs, c = FIXED
    point = dict(q=Q, q_aa=COV[0], q_bb=COV[1], q_ab=COV[2], q_star=qs, c=c, sigma_w2=SW, sigma_b2=SB)
    return call(f"{kernel}_{act}", **point)


@pytest.mark.parametrize("act", NAMED)
def test_per_activation_kernels_against_mpmath(act):
    ref = references(act)
    for kernel, want in ref.items():
        got = values(act, kernel)
        assert got == pytest.approx(float(want), rel=1e-12, abs=1e-14), (act, kernel)  # found: <= 1.3e-15


def test_a_wrong_activation_fails_the_same_comparison():
    """The comparison has power: tanh's kernels are not erf's references, nor at another variance."""
    ref = references("erf")
    assert values("tanh", "length_map") != pytest.approx(float(ref["length_map"]), rel=1e-3)
    qs, c = FIXED
    assert call("chi_c_erf", q_star=qs * 1.001, c=c, sigma_w2=SW) != pytest.approx(float(ref["chi_c"]), rel=1e-5)


@pytest.mark.parametrize("act", NAMED)
def test_per_activation_kernels_equal_the_generic_kernels_on_the_engine(act):
    """The two routes of the driver at the same point: the activation's own kernels, and the generic kernels with
    resprop's expectation engine (erf and ReLU closed forms coded by hand in resprop, tanh and GELU by its
    generated Gauss--Legendre modules)."""
    kern = expectations.kernels(act)
    qs, c = FIXED
    d_sq = kern.mean_dphi_dphi(qs, qs, qs)
    generic = {
        "length_map": G.length_map(SW, SB, kern.mean_phi_sq(Q)),
        "covariance_map": G.covariance_map(SW, SB, kern.mean_phi_phi(*COV)),
        "correlation_map": G.correlation_map(SW, SB, kern.mean_phi_phi(qs, qs, c * qs), qs),
        "chi_1": G.chi_1(SW, d_sq),
        "chi_q": G.chi_q(SW, d_sq, kern.price_diag(qs) - d_sq),
        "chi_c": G.chi_c(SW, kern.mean_dphi_dphi(qs, qs, c * qs)),
        "critical_sigma_w2": G.critical_sigma_w2(d_sq),
        "critical_sigma_b2": G.critical_sigma_b2(qs, kern.mean_phi_sq(qs), d_sq),
    }
    for kernel, want in generic.items():
        # the engine's ReLU arc-cosine kernel on its diagonal: arccos(1 - 1 ulp) = 1.5e-8 costs 2.4e-9 relative
        rel = 1e-8 if act == "relu" and kernel in ("chi_1", "critical_sigma_w2", "critical_sigma_b2") else 1e-12
        assert values(act, kernel) == pytest.approx(float(np.asarray(want).reshape(-1)[0]), rel=rel, abs=1e-14), \
            (act, kernel)


@pytest.mark.parametrize("act, sw, sb", [("tanh", 2.5, 0.05), ("erf", 2.0, 0.1), ("relu", 1.5, 0.3),
                                         ("gelu", 1.5, 0.1), ("gelu", 1.9, 0.5)])
def test_the_driver_fixes_the_kernels_maps(act, sw, sb):
    r = D.depth_scales(act, sw, sb)
    assert r.generated and r.closed_form == (act != "tanh")
    assert call(f"length_map_{act}", q=r.q_star, sigma_w2=sw, sigma_b2=sb) == pytest.approx(r.q_star, rel=1e-13)
    assert call(f"chi_1_{act}", q_star=r.q_star, sigma_w2=sw) == r.chi_1
    assert call(f"chi_q_{act}", q_star=r.q_star, sigma_w2=sw) == r.chi_q
    if r.phase == "chaotic":
        m = call(f"correlation_map_{act}", q_star=r.q_star, c=r.c_star, sigma_w2=sw, sigma_b2=sb)
        assert m == pytest.approx(r.c_star, rel=1e-13)
        assert call(f"chi_c_{act}", q_star=r.q_star, c=r.c_star, sigma_w2=sw) == r.chi_c
    else:  # c* = 1: the correlation map fixes it, chi_c = chi_1
        assert call(f"correlation_map_{act}", q_star=r.q_star, c=1.0, sigma_w2=sw, sigma_b2=sb) == \
            pytest.approx(1.0, rel=1e-13)
        assert call(f"chi_c_{act}", q_star=r.q_star, c=1.0, sigma_w2=sw) == pytest.approx(r.chi_1, rel=1e-13)


@pytest.mark.parametrize("act", ["tanh", "erf", "gelu"])
def test_the_critical_point_is_on_the_kernels_line(act):
    crit = D.critical_point(act, 0.05)
    assert call(f"critical_sigma_b2_{act}", q_star=crit.q_star) == pytest.approx(0.05, rel=1e-12)
    assert call(f"chi_1_{act}", q_star=crit.q_star, sigma_w2=crit.sigma_w2) == pytest.approx(1.0, rel=1e-14)
    assert call(f"length_map_{act}", q=crit.q_star, sigma_w2=crit.sigma_w2, sigma_b2=0.05) == \
        pytest.approx(crit.q_star, rel=1e-12)
