"""float64 generated kernels against mpmath at 30 digits (quadrature route uses no closed form).

The quadrature-route references run at 20 digits: the comparison is at 1e-10 relative, the 20-digit
quadrature agrees with the 30-digit one to > 18 digits, and it costs less than half as much (L = 50: 7 s -> 3 s)."""
import mpmath as mp
import pytest

from resprop.numeric.theories.fischer import field_theory as F
from resprop.numeric.theories.fischer.mp_checks import chi_out_mp, rho_star_mp

SETTINGS = [(0.05, 10, 0.3, 1.25, 0.05), (1.4, 20, 1.0, 1.2, 0.2), (0.2, 50, 0.15, 2.0, 0.0)]


@pytest.mark.parametrize("k0,L,rho,sw,sb", SETTINGS)
def test_chi_out_diagonal_quadrature_route(k0, L, rho, sw, sb):
    ref = chi_out_mp(k0, L, rho, sw, sb, dps=20, route="quadrature")
    got = F.response(k0, L, rho, sw, sb)["chi_out"]
    assert abs(mp.mpf(got) / ref - 1) < 1e-10


def test_chi_out_tanh_quadrature_route():
    ref = chi_out_mp(0.3, 10, 0.4, 1.5, 0.05, activation="tanh", dps=20, route="quadrature")
    got = F.response(0.3, 10, 0.4, 1.5, 0.05, activation="tanh")["chi_out"]
    assert abs(mp.mpf(got) / ref - 1) < 1e-10  # generated 1-D quadrature route for tanh


@pytest.mark.parametrize("k0,L,rho,sw,sb", SETTINGS)
def test_chi_out_offdiagonal(k0, L, rho, sw, sb):
    ref = chi_out_mp(k0, L, rho, sw, sb, input_kernel_offdiag=0.6 * k0, dps=30, route="closed")
    got = F.response(k0, L, rho, sw, sb, input_kernel_offdiag=0.6 * k0)["chi_out_offdiag"]
    assert abs(mp.mpf(got) / ref - 1) < 1e-10


@pytest.mark.parametrize("L", [10, 50])
def test_rho_star_30_digits(L):
    """rho* at 2e-10 relative (the slope root is refined; the maximum's flatness alone would allow only
    ~sqrt(eps)), and chi_out at rho* to 1e-12."""
    rs = F.rho_star([L], 0.05, 1.25, 0.05, input_kernel_offdiag=0.03)
    for key, off in (("rho_star", None), ("rho_star_offdiag", 0.03)):
        ref = rho_star_mp(0.05, L, 1.25, 0.05, start=float(rs[key][0]), input_kernel_offdiag=off, dps=30)
        assert abs(mp.mpf(float(rs[key][0])) / ref - 1) < 2e-10
        chi_ref = chi_out_mp(0.05, L, ref, 1.25, 0.05, input_kernel_offdiag=off, route="closed")
        assert abs(mp.mpf(float(rs[key + "_chi_out"][0])) / chi_ref - 1) < 1e-12
