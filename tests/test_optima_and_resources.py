"""Issue 11, parts 3 and 5: optima that are honest, bounded resources, and validated boundaries.

* rho* is None (JSON null) where chi_out has no interior maximum in the searched range, with the edge the
  supremum approaches; the README's bias-dominated case, linear and ReLU activations and identical inputs.
* The edge decision is robust: an interior maximum within one grid step of an edge is still found.
* The fast pair pass of rho_star/response equals the general propagate driver (an independent code path).
* kernel_fluctuations uses O(depth) memory and equals the old dense G12 B G12^T route (kept below as an
  independent reference) to 1e-12; depths it cannot afford are refused up front naming ``depth``.
* ode_limit and the public functions of the numeric drivers reject NaN, inf, out-of-range, non-numeric and
  empty input with a ParameterError naming the parameter; integer and float32 input change nothing.
"""
from __future__ import annotations

import json
import math
import tracemalloc

import numpy as np
import pytest

from resprop.numeric.cli import main
from resprop.numeric.engine.expectations import kernels
from resprop.numeric.engine.validation import ParameterError
from resprop.numeric.theories.fischer import field_theory as F
from resprop.numeric.theories.fischer import fluctuations as FL
from resprop.numeric.theories.stable import stable_resnet as SR

FIG4 = dict(input_kernel=0.05, sigma_w2=1.25, sigma_b2=0.05)


# --------------------------------------------------------------------------- honest optima
def test_bias_dominated_has_no_interior_maximum():
    """README: sigma_w^2 = 0.8, sigma_b^2 = 0.2, K^(0) = 0.05: chi_out falls monotonically, so rho* is None and
    the supremum is approached at the lower edge of the searched range."""
    rs = F.rho_star([10, 100], 0.05, 0.8, 0.2)
    assert list(rs["rho_star"]) == [None, None]
    assert rs["rho_star_interior"].tolist() == [False, False]
    assert rs["rho_star_supremum_at"].tolist() == ["lower", "lower"]
    assert np.all(rs["rho_star_bound"] == 1e-3)
    assert list(rs["rho_star_boundary"]) == ["rho -> 0.001 (lower edge)"] * 2
    # the reported supremum is chi_out at the edge, by the general driver (another code path)
    ref = F.chi_out_curves([1e-3], [10, 100], 0.05, 0.8, 0.2)["chi_out"][:, 0]
    assert np.allclose(rs["rho_star_chi_out"], ref, rtol=1e-13, atol=0)
    # and the curve really is monotone on a fine grid (so None is the right answer)
    c = F.chi_out_curves(np.geomspace(1e-3, 3, 600), [10, 100], 0.05, 0.8, 0.2)["chi_out"]
    assert np.all(np.diff(c, axis=1) < 0)


def test_linear_activation_supremum_at_upper_edge():
    """Linear: eta^(l) = rho^2 sigma_w^2 chi^(l-1), so chi_out = sigma_w2 (1 + rho^2 sigma_w^2)^L grows without
    bound in rho; the supremum over [0.001, 3] is at rho = 3, in closed form."""
    L = np.array([5, 40])
    rs = F.rho_star(L, activation="linear", **FIG4)
    assert list(rs["rho_star"]) == [None, None]
    assert rs["rho_star_supremum_at"].tolist() == ["upper", "upper"]
    assert list(rs["rho_star_boundary"]) == ["rho -> 3 (upper edge)"] * 2
    closed = 1.25 * (1 + 9 * 1.25) ** L.astype(float)
    assert np.allclose(rs["rho_star_chi_out"], closed, rtol=1e-12, atol=0)


def test_relu_supremum_at_upper_edge():
    rs = F.rho_star([10], activation="relu", **FIG4)
    assert rs["rho_star"][0] is None and rs["rho_star_supremum_at"][0] == "upper"
    c = F.chi_out_curves(np.geomspace(1e-3, 3, 300), [10], activation="relu", **FIG4)["chi_out"][0]
    assert np.all(np.diff(c) > 0)


def test_identical_inputs_offdiagonal_has_no_interior_maximum():
    """k0_offdiag = k0 (identical inputs): the off-diagonal chi_out (<phi'_a phi'_b> = <phi'^2>) grows with rho on
    the whole range; the diagonal element is unaffected and keeps its interior rho*."""
    rs = F.rho_star([10, 100], input_kernel_offdiag=0.05, **FIG4)
    assert list(rs["rho_star_offdiag"]) == [None, None]
    assert rs["rho_star_offdiag_supremum_at"].tolist() == ["upper", "upper"]
    alone = F.rho_star([10, 100], **FIG4)
    assert rs["rho_star"].dtype == float and np.allclose(rs["rho_star"], alone["rho_star"], rtol=1e-12)
    # identical inputs stay identical: the off-diagonal chi_out curve is smooth and increasing (no round-off bumps)
    c = F.chi_out_curves(np.geomspace(2.5, 3, 50), [100], input_kernel_offdiag=0.05, **FIG4)
    direct = F._pair_pass(np.geomspace(2.5, 3, 50), 1.25, 0.05, 1.25, 0.05, 0.05, 0.05, np.array(100),
                          kernels("erf"))["chi_out_off"]
    assert np.all(np.diff(direct) > 0)
    assert np.all(np.isfinite(c["chi_out_offdiag"]))


def test_interior_maximum_within_one_grid_step_of_either_edge():
    """The edge decision is not a tolerance: the grid maximum sits at an end point, but the maximum lies inside
    the first (last) grid step, and it is found to the same rho* as with the default grid."""
    ref = float(F.rho_star([50], **FIG4)["rho_star"][0])  # 0.138...
    lower = np.geomspace(ref * 0.99, 3.0, 20)   # first step (ref*0.99, ref*0.99*1.35) contains rho*
    upper = np.geomspace(1e-3, ref * 1.01, 20)  # last step contains rho*
    for grid in (lower, upper):
        rs = F.rho_star([50], grid=grid, **FIG4)
        assert rs["rho_star_interior"][0], grid[[0, -1]]
        assert abs(rs["rho_star"][0] / ref - 1) < 1e-9
    # ranges that exclude rho*: the supremum is at the edge nearest to it
    below = F.rho_star([50], grid=np.geomspace(1e-3, ref * 0.9, 50), **FIG4)
    above = F.rho_star([50], grid=np.geomspace(ref * 1.1, 3.0, 50), **FIG4)
    assert below["rho_star"][0] is None and below["rho_star_supremum_at"][0] == "upper"
    assert above["rho_star"][0] is None and above["rho_star_supremum_at"][0] == "lower"
    assert math.isclose(below["rho_star_bound"][0], ref * 0.9, rel_tol=1e-12)


def test_rho_star_batch_mixes_interior_and_edge():
    """sigma_b2 as an array over the batch: the interior elements keep their float rho*, the edge one is None."""
    rs = F.rho_star([10], 0.05, np.array([[1.25, 0.8]]), np.array([[0.05, 0.2]]))
    assert rs["rho_star"].dtype == object
    assert rs["rho_star"][0, 1] is None and isinstance(rs["rho_star"][0, 0], float)
    assert abs(rs["rho_star"][0, 0] / F.rho_star([10], **FIG4)["rho_star"][0] - 1) < 1e-10
    assert np.isnan(np.asarray(rs["rho_star"], dtype=float)[0, 1])


def test_rho_star_pairs_reports_edges():
    K0 = np.array([[0.05, 0.03], [0.03, 0.05]])
    ok = F.rho_star_pairs(K0, 50, 1.25, 0.05, with_status=True)
    assert ok["rho_star"].dtype == float and ok["interior"].all()
    assert math.isclose(ok["rho_star"][0, 0], F.rho_star([50], **FIG4)["rho_star"][0], rel_tol=1e-8)
    bad = F.rho_star_pairs(K0, 10, 0.8, 0.2, with_status=True)
    assert bad["rho_star"][0, 0] is None and bad["supremum_at"][0, 0] == "lower"


def _cli(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_rho_star_says_no_interior_maximum(capsys):
    base = ["rho-star", "--depth", "10", "100", "--input-kernel", "0.05", "--sigma-w2", "0.8", "--sigma-b2", "0.2"]
    code, out, err = _cli(base + ["--json"], capsys)
    data = json.loads(out)
    assert code == 0 and data["rho_star"] == [None, None]
    assert data["rho_star_boundary"] == ["rho -> 0.001 (lower edge)"] * 2 and data["search_range"] == [0.001, 3.0]
    code, out, err = _cli(base + ["--quiet"], capsys)
    assert code == 0 and "no interior maximum" in out and "rho -> 0.001 (lower edge)" in out and err == ""
    code, out, _ = _cli(["rho-star", "--depth", "10", "--input-kernel", "0.05", "--input-kernel-offdiag", "0.05", "--sigma-w2",
                         "1.25", "--sigma-b2", "0.05", "--json"], capsys)
    data = json.loads(out)
    assert data["rho_star_offdiag"] == [None] and isinstance(data["rho_star"][0], float)
    assert data["rho_star_offdiag_boundary"] == ["rho -> 3 (upper edge)"] and data["rho_star_boundary"] == [None]
    code, out, _ = _cli(["rho-star", "--depth", "10", "--input-kernel", "0.05", "--sigma-w2", "1.25", "--sigma-b2",
                         "0.05", "--activation", "relu", "--json"], capsys)
    assert json.loads(out)["rho_star"] == [None]
    # a wider range: the depth-1e6 rho* (~0.00097) lies below the default lower edge 0.001
    code, out, _ = _cli(["rho-star", "--depth", "50", "--input-kernel", "0.05", "--sigma-w2", "1.25", "--sigma-b2", "0.05",
                         "--rho-min", "0.2", "--rho-max", "1", "--json"], capsys)
    assert json.loads(out)["rho_star"] == [None] and json.loads(out)["rho_star_boundary"] == ["rho -> 0.2 (lower edge)"]
    code, _, err = _cli(["rho-star", "--depth", "5", "--input-kernel", "0.05", "--sigma-w2", "1.25", "--sigma-b2", "0.05",
                         "--rho-min", "1", "--rho-max", "0.5"], capsys)
    assert code == 2 and "rho_max" in err


def test_progress_bar_on_stderr_unless_quiet(capsys, monkeypatch):
    import resprop.numeric.theories.fischer.field_theory as ft

    made = []
    real = ft._layer_bar

    def spy(total, desc, enabled):
        made.append(enabled)
        return real(total, desc, enabled)

    monkeypatch.setattr(ft, "_layer_bar", spy)
    args = ["response", "--rho", "0.1", "--depth", "300", "--input-kernel", "0.05", "--sigma-w2", "1.25", "--sigma-b2", "0.05"]
    assert _cli(args + ["--json"], capsys)[0] == 0 and made == [True]
    assert _cli(args + ["--json", "--quiet"], capsys)[0] == 0 and made == [True, False]
    made.clear()
    assert _cli(["rho-star", "--depth", "30", "--input-kernel", "0.05", "--sigma-w2", "1.25", "--sigma-b2", "0.05",
                 "--quiet"], capsys)[0] == 0
    assert made and not any(made)


# --------------------------------------------------------------------------- fast pass = general driver
@pytest.mark.parametrize("activation", ["erf", "relu", "tanh"])
def test_pair_pass_equals_propagate(activation):
    rho = np.geomspace(1e-2, 1.0, 7)
    depths = [3, 17, 40]
    ref = F.chi_out_curves(rho, depths, 0.3, 1.3, 0.07, input_kernel_offdiag=-0.1, activation=activation)
    fast = F._pair_pass(rho[None, :], 1.3, 0.07, 1.3, 0.07, 0.3, -0.1, np.array(depths)[:, None],
                        kernels(activation))
    assert np.allclose(fast["chi_out_diag"], ref["chi_out"], rtol=1e-13, atol=0)
    assert np.allclose(fast["chi_out_off"], ref["chi_out_offdiag"], rtol=1e-13, atol=0)


def test_response_layers_preallocated_and_linear_in_depth():
    """response keeps (L+1) float64 per quantity: memory grows linearly, ~ 6 x 8 bytes per layer."""
    tracemalloc.start()
    r = F.response(0.05, 20_000, 0.005, 1.25, 0.05, input_kernel_offdiag=0.03, progress=False)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert r["K"].shape == (20_001,) and np.all(np.isfinite(r["chi"]))
    assert peak < 4 * 2**20  # 6 arrays x 160 kB + cumsums; lists of per-layer arrays needed > 12 MB


# --------------------------------------------------------------------------- kernel fluctuations
def _dense_reference(k0, L, N, rho, sw, sb, activation):
    """The pre-issue-11 dense route: the (L+2) x (L+2) propagator G12, B = N w w^T kappa, G12 B G12^T."""
    import resprop.numeric.theories.fischer.generated.fischer as gen

    kern = kernels(activation)
    K = F.response(k0, L, rho, sw, sb, activation=activation)["K"]
    w = np.array([0.0] + [rho**2 * sw] * L + [sw])
    g = np.concatenate([[0.0], kern.price_diag(K)])
    n = L + 2
    G12 = np.zeros((n, n))
    for l in range(n):
        G12[l] = (np.arange(n) == l) / N
        if l > 0:
            G12[l] += w[l] * g[l] * G12[:l].sum(axis=0)
    Ka = K[:, None] * np.ones(L + 1)[None, :]
    Kb = Ka.T
    kappa = gen.fourth_cumulant(kern.mean_phi_sq_phi_sq(Ka, Kb, np.minimum(Ka, Kb)), kern.mean_phi_sq(Ka),
                                kern.mean_phi_sq(Kb))
    B = np.zeros((n, n))
    B[1:, 1:] = N * np.outer(w[1:], w[1:]) * kappa
    cov = G12 @ B @ G12.T
    cum = np.cumsum(np.cumsum(cov[: L + 1, : L + 1], axis=0), axis=1)
    return {"cov_C": cov, "var_C": np.diag(cov).copy(), "var_K": np.diag(cum).copy(),
            "var_K_diagonal_sum": np.cumsum(np.diag(cov)[: L + 1]), "G12": G12}


@pytest.mark.parametrize("activation, args", [("erf", (1.4, 20, 500, 0.5, 1.2, 0.2)),
                                              ("relu", (0.3, 30, 100, 0.4, 1.5, 0.1)),
                                              ("linear", (0.3, 15, 10, 0.7, 1.1, 0.0)),
                                              ("tanh", (0.5, 6, 50, 0.9, 1.3, 0.05))])
def test_kernel_fluctuations_equal_dense_route(activation, args):
    ref = _dense_reference(*args, activation)
    new = FL.kernel_fluctuations(*args, activation=activation, full=True)
    for key in ("var_K", "var_C", "var_K_diagonal_sum"):
        assert np.allclose(new[key], ref[key], rtol=1e-12, atol=0), key
    assert np.allclose(new["cov_C"], ref["cov_C"], rtol=1e-12, atol=1e-300)
    assert np.array_equal(new["G12"], ref["G12"])
    assert FL.kernel_fluctuations(*args, activation=activation).cov_C is None  # O(depth) by default


def test_kernel_fluctuations_depth_2000_in_bounded_memory():
    tracemalloc.start()
    r = FL.kernel_fluctuations(0.05, 2000, 100, 0.1, 1.25, 0.05, activation="relu")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 100 * 2**20
    assert r["var_K"].shape == (2001,) and np.all(np.isfinite(r["var_K"])) and np.all(np.diff(r["var_K"]) > 0)
    # the dense route would hold (L+2)^2 fourth-cumulant node arrays: erf beyond its cumulant budget goes to the
    # finite-width kernel engine (O(depth), issue 27), which stops at its own MAX_DEPTH; full=True is refused
    tracemalloc.start()
    with pytest.raises(ParameterError, match=r"^depth: must be <= \d+ for activation 'erf'.*GiB"):
        FL.kernel_fluctuations(0.05, 2000, 100, 0.1, 1.25, 0.05, full=True)
    with pytest.raises(ParameterError, match=r"^depth: must be <= 10000 for activation 'erf'"):
        FL.kernel_fluctuations(0.05, 10**5, 100, 0.1, 1.25, 0.05)
    with pytest.raises(ParameterError, match=r"^depth: .*full=False"):
        FL.kernel_fluctuations(0.05, 6000, 100, 0.1, 1.25, 0.05, activation="linear", full=True)
    assert tracemalloc.get_traced_memory()[1] < 100 * 2**20
    tracemalloc.stop()
    assert FL.max_depth("erf") >= 300 and FL.max_depth("relu") >= 5000


# --------------------------------------------------------------------------- ode_limit
Q2 = [[1.0, 0.5], [0.5, 1.0]]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kwargs, name", [
    (dict(t_eval=[float("nan")]), "t_eval"), (dict(t_eval=[-1.0]), "t_eval"), (dict(t_eval=[math.inf]), "t_eval"),
    (dict(t_eval=[0.5, 0.2]), "t_eval"), (dict(t_eval=[1.5]), "t_eval"), (dict(t_eval=[]), "t_eval"),
    (dict(t_eval="x"), "t_eval"), (dict(t_eval=[0.5], sigma_w2=float("nan")), "sigma_w2"),
    (dict(t_eval=[0.5], sigma_w2=0.0), "sigma_w2"), (dict(t_eval=[0.5], sigma_b2=-1.0), "sigma_b2"),
    (dict(t_eval=[0.5], sigma_b2=math.inf), "sigma_b2"), (dict(t_eval=[0.5], rtol=float("nan")), "rtol"),
    (dict(t_eval=[0.5], rtol=0.0), "rtol"), (dict(t_eval=[0.5], rtol=1e-20), "rtol"),
    (dict(input_kernel=[[float("nan")]], t_eval=[0.5]), "input_kernel"),
    (dict(input_kernel=[], t_eval=[0.5]), "input_kernel"),
])
def test_ode_limit_rejects_bad_input(kwargs, name):
    kw = {"input_kernel": Q2, **kwargs}
    with pytest.raises(ParameterError) as exc:
        SR.ode_limit(kw.pop("input_kernel"), **kw)
    assert exc.value.parameter.startswith(name)


def test_ode_limit_integer_and_float32_input():
    ref = SR.ode_limit(Q2, [0.0, 0.5, 1.0])
    assert np.array_equal(SR.ode_limit(np.array(Q2, np.float32), np.array([0, 0.5, 1], np.float32)), ref)
    assert np.array_equal(SR.ode_limit(np.eye(2, dtype=np.int64) + 0.5 * (1 - np.eye(2)), np.array([0, 1])),
                          ref[[0, 2]])
    assert np.array_equal(SR.ode_limit(Q2, 0.0)[0], np.array(Q2))


# --------------------------------------------------------------------------- boundary validation, table-driven
X3 = [[1.0, 0.2, 0.1], [0.3, 1.0, -0.2]]
K2 = [[1.0, 0.5], [0.5, 1.0]]
#: (function, a cheap valid call, {parameter: kind}); kinds: pos (0, inf), nonneg [0, inf), real, unit_open [0, 1),
#: angle [0, pi], unit [0, 1] (sequence), matrix (PSD kernel), ("int", minimum)
TABLE = [
    ("resprop.numeric.theories.fischer.field_theory.input_kernel", dict(X=X3), dict(sigma_w2_in="pos", sigma_b2_in="nonneg", X="real")),
    ("resprop.numeric.theories.fischer.field_theory.nngp", dict(input_kernel=K2, depth=5, rho=0.3, sigma_w2=1.25, sigma_b2=0.05),
     dict(input_kernel="matrix", depth=("int", 1), rho="nonneg", sigma_w2="pos", sigma_b2="nonneg")),
    ("resprop.numeric.theories.fischer.field_theory.response", dict(input_kernel=0.05, depth=10, rho=0.3, sigma_w2=1.25, sigma_b2=0.05, input_kernel_offdiag=0.02),
     dict(input_kernel="pos", depth=("int", 1), rho="nonneg", sigma_w2="pos", sigma_b2="nonneg", input_kernel_offdiag="real")),
    ("resprop.numeric.theories.fischer.field_theory.chi_out_curves", dict(rho=[0.1, 0.3], depths=[5], input_kernel=0.05, sigma_w2=1.25, sigma_b2=0.05),
     dict(rho="nonneg", depths=("int", 1), input_kernel="pos", sigma_w2="pos", sigma_b2="nonneg")),
    ("resprop.numeric.theories.fischer.field_theory.rho_star", dict(depths=[10], input_kernel=0.05, sigma_w2=1.25, sigma_b2=0.05, input_kernel_offdiag=0.03),
     dict(depths=("int", 1), input_kernel="pos", sigma_w2="pos", sigma_b2="nonneg", input_kernel_offdiag="real")),
    ("resprop.numeric.theories.fischer.field_theory.rho_star_pairs", dict(input_kernel=[[0.05, 0.03], [0.03, 0.05]], depth=10, sigma_w2=1.25,
                                                 sigma_b2=0.05),
     dict(input_kernel="matrix", depth=("int", 1), sigma_w2="pos", sigma_b2="nonneg")),
    ("resprop.numeric.theories.fischer.field_theory.linearised_rho_star", dict(depths=[10], input_kernel=0.05, sigma_w2=1.25, sigma_b2=0.05),
     dict(depths=("int", 1), sigma_w2="pos", sigma_b2="nonneg", target_variance="pos")),
    ("resprop.numeric.theories.fischer.fluctuations.kernel_fluctuations", dict(input_kernel=0.5, depth=5, width=100, rho=0.3, sigma_w2=1.25,
                                                      sigma_b2=0.05),
     dict(input_kernel="pos", depth=("int", 1), width=("int", 1), rho="nonneg", sigma_w2="pos", sigma_b2="nonneg")),
    ("resprop.numeric.theories.stable.stable_resnet.kernels", dict(input_kernel=K2, depth=5), dict(input_kernel="matrix", depth=("int", 1), sigma_w2="pos",
                                                                 sigma_b2="nonneg")),
    ("resprop.numeric.theories.stable.stable_resnet.two_input_kernels", dict(depths=[5]),
     dict(depths=("int", 1), angle="angle", sigma_w2="pos", sigma_b2="nonneg", d_in=("int", 2))),
    ("resprop.numeric.theories.stable.stable_resnet.ode_limit", dict(input_kernel=K2, t_eval=[0.5, 1.0]),
     dict(input_kernel="matrix", t_eval="unit", sigma_w2="pos", sigma_b2="nonneg", rtol="pos")),
    ("resprop.numeric.theories.stable.stable_resnet.input_kernel_matrix", dict(X=X3, sigma_w2=2.0, sigma_b2=0.0),
     dict(X="real", sigma_w2="pos", sigma_b2="nonneg")),
    ("resprop.numeric.engine.simulate.simulate_kernels", dict(X=X3, depth=3, width=8, rho=0.5, sigma_w2=1.25, sigma_b2=0.05,
                                               samples=4, seed=0),
     dict(X="real", depth=("int", 1), width=("int", 1), rho="nonneg", sigma_b2="nonneg", samples=("int", 1))),
    ("resprop.numeric.engine.simulate.finite_difference_response", dict(x=[1.0, 0.5, 0.2], delta=1e-3, depth=3, width=8, rho=0.5,
                                                         sigma_w2=1.25, sigma_b2=0.05, samples=4, seed=0),
     dict(x="real", delta="pos", depth=("int", 1), width=("int", 1), rho="nonneg", samples=("int", 1))),
    ("resprop.numeric.theories.pdlt.residual_mlp.critical_C_W", dict(gamma=0.5, activation="tanh"), dict(gamma="unit_open")),
    ("resprop.numeric.theories.pdlt.residual_mlp.nu", dict(gamma=0.5, activation="relu"), dict(gamma="unit_open")),
    ("resprop.numeric.theories.pdlt.residual_mlp.gamma_star", dict(r=1.0, activation="relu", n_out=1), dict(r="pos")),
    ("resprop.numeric.theories.pdlt.residual_mlp.vertex_trajectory", dict(activation="tanh", gamma=0.5, depth=3),
     dict(gamma="unit_open", depth=("int", 0), input_kernel="pos", C_b="nonneg")),
    ("resprop.numeric.theories.pdlt.residual_mlp.xi_from_correlators", dict(gamma=0.5, G_RR=1.0, G_Rz=0.2, G_zz=1.0),
     dict(gamma="unit_open", G_RR="pos", G_Rz="real", G_zz="pos")),
    ("resprop.numeric.theories.stable.residual_ntk.nngp_ntk", dict(input_kernel=K2, depth=5, rho=0.3, sigma_w2=1.25, sigma_b2=0.05),
     dict(input_kernel="matrix", depth=("int", 1), rho="nonneg", sigma_w2="pos", sigma_b2="nonneg")),
    ("resprop.numeric.theories.fischer.mp_checks.chi_out_mp", dict(input_kernel=0.05, depth=3, rho=0.3, sigma_w2=1.25, sigma_b2=0.05, dps=15,
                                          route="closed"),
     dict(input_kernel="pos", depth=("int", 1), rho="nonneg", sigma_w2="pos", sigma_b2="nonneg", dps=("int", 1))),
    ("resprop.numeric.theories.lognormal.mp_checks.j2bar_closed_mp", dict(theta=1.0, dps=10), dict(theta="angle", dps=("int", 1))),
    ("resprop.numeric.theories.pdlt.mp_checks.vertex_trajectory_mp", dict(activation="relu", gamma=0.5, depth=2, dps=10),
     dict(gamma="unit_open", depth=("int", 0), dps=("int", 1))),
    ("resprop.numeric.engine.monte_carlo.simulate_log_gaussian", dict(width=8, depth=2, alpha=0.7, lam=0.7, samples=50, seed=0),
     dict(width=("int", 2), depth=("int", 1), samples=("int", 2), lam="nonneg", alpha="real")),
    ("resprop.numeric.engine.monte_carlo.simulate_residual_mlp", dict(width=8, depth=1, gamma=0.5, C_W=0.75, samples=50, seed=0),
     dict(width=("int", 1), depth=("int", 0), samples=("int", 2), gamma="real", C_W="pos", C_b="nonneg", input_kernel="pos")),
]
OPTIONAL = {"input_kernel_offdiag"}  # None is their documented default
DEFAULTS = {"sigma_w2_in": 1.0, "sigma_b2_in": 0.0, "target_variance": 0.5, "angle": 1.0, "d_in": 2,
            "sigma_w2": 2.0, "sigma_b2": 0.0, "rtol": 1e-11, "input_kernel": 1.0, "C_b": 0.0}


def _variants(kind, value):
    """(label, bad or odd value, expectation): error (ParameterError naming the parameter), same (as the float64
    call), either (a finite result or a ParameterError)."""
    common = [("non-numeric", "abc", "error"), ("empty", [], "error"), ("none", None, "error")]
    if isinstance(kind, tuple):
        lo = kind[1]
        return common + [("below-min", lo - 1, "error"), ("fraction", 2.5, "error"), ("nan", math.nan, "error"),
                         ("bool", True, "error"), ("huge", 10**30, "error"),
                         ("numpy-int", np.asarray(value, np.int64) if np.ndim(value) else np.int64(value), "same")]
    out = common + [("nan", math.nan, "error"), ("inf", math.inf, "error"), ("-inf", -math.inf, "error")]
    if kind != "matrix":
        out.append(("float32", np.asarray(value, np.float32), "same32"))
    if kind in ("pos", "nonneg", "angle", "unit_open", "unit"):
        out.append(("negative", -1.0 if kind != "unit" else [-1.0], "error"))
    out += {"pos": [("zero", 0.0, "error"), ("huge", 1e300, "either")],
            "nonneg": [("zero", 0.0, "either"), ("huge", 1e300, "either")],
            "real": [("huge", 1e300, "either")],
            "unit_open": [("one", 1.0, "error"), ("huge", 1e300, "error")],
            "angle": [("above-pi", 4.0, "error")],
            "unit": [("above-one", [2.0], "error"), ("unsorted", [1.0, 0.5], "error")],
            "matrix": [("not-symmetric", [[1.0, 0.2], [0.3, 1.0]], "error"), ("not-psd", [[1.0, 2.0], [2.0, 1.0]],
                                                                                "error")]}.get(kind, [])
    return out


def _cases():
    for path, base, params in TABLE:
        for name, kind in params.items():
            value = base.get(name, DEFAULTS.get(name))
            for label, bad, expect in _variants(kind, value):
                if label == "none" and name in OPTIONAL:
                    continue
                yield pytest.param(path, base, name, value, bad, expect, id=f"{path.split('.', 1)[1]}:{name}={label}")


def _finite(out) -> bool:
    if hasattr(out, "to_dict"):  # a typed result (resprop.numeric.engine.results): its fields
        out = {k: getattr(out, k) for k in out.fields()}
    if isinstance(out, dict):
        return all(_finite(v) for k, v in out.items() if not k.endswith(("_bound", "_boundary", "_supremum_at")))
    if out is None or isinstance(out, str) or hasattr(out, "__dataclass_fields__"):
        return True
    try:
        arr = np.asarray(out, float)
    except (TypeError, ValueError):
        return True
    return bool(np.all(np.isfinite(arr)))


def _same(a, b) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if hasattr(a, "__dataclass_fields__"):
        return _same({k: v for k, v in vars(a).items() if k != "seed"}, {k: v for k, v in vars(b).items() if k != "seed"})
    try:
        x, y = np.asarray(a, float), np.asarray(b, float)
    except (TypeError, ValueError):
        return bool(np.all(np.asarray(a == b))) if not isinstance(a, str) else a == b
    return x.shape == y.shape and bool(np.array_equal(x, y, equal_nan=True))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("path, base, name, value, bad, expect", list(_cases()))
def test_public_functions_validate_at_the_boundary(path, base, name, value, bad, expect):
    import importlib

    module, func = path.rsplit(".", 1)
    fn = getattr(importlib.import_module(module), func)
    kwargs = {**base, name: bad}
    singular = name.rstrip("s")  # depths -> depth
    if expect == "error":
        with pytest.raises(ParameterError) as exc:
            fn(**kwargs)
        assert singular in exc.value.parameter or name in exc.value.parameter, str(exc.value)
        return
    if expect == "either":
        try:
            out = fn(**kwargs)
        except ParameterError as exc:  # a range error names the inputs responsible
            assert exc.parameter
            return
        assert _finite(out)
        return
    ref_value = np.asarray(np.asarray(value, np.float32), float).tolist() if expect == "same32" else value
    assert _same(fn(**kwargs), fn(**{**base, name: ref_value}))
