"""The elementwise recursions lowered to compiled loops (derive/compiled.py `elementwise_spec`, issue 25): PDLT's
single-input kernel/vertex trajectory of the scale-invariant class, its corrected vertex, and the kernel engine's
diagonal recursions, against the generated NumPy kernels of the same derivations (the reference), over
hypothesis-drawn parameters.  Agreement: 1e-14 relative per layer (the compiled loops contract multiply-adds)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

comp = pytest.importorskip("resprop.numeric.theories.pdlt.generated.pdlt_compiled")
import resprop.generated.residual_compiled as rcomp  # noqa: E402
import resprop.generated.residual_recursions as rrec  # noqa: E402
import resprop.numeric.theories.pdlt.generated.pdlt_corrected_compiled as pcc  # noqa: E402
import resprop.numeric.theories.pdlt.generated.pdlt_corrected_recursions as pcr  # noqa: E402
import resprop.numeric.theories.pdlt.generated.pdlt_recursions as prr  # noqa: E402
from resprop.numeric.theories.pdlt.residual_mlp import vertex_trajectory  # noqa: E402


def _numpy_trajectory(fn, states, seqs, **kw):
    out = []

    def keep(l, *state):
        out.append(np.array([np.array(s, copy=True) for s in state]))

    fn(*[s.copy() for s in states], *seqs, record=keep, **kw)
    return np.array(out)


def _close(a, b, rtol=1e-14):
    scale = np.maximum(np.abs(b), np.finfo(float).tiny)
    assert np.all(np.abs(a - b) <= rtol * 8 * scale + 1e-300), float(np.max(np.abs(a - b) / scale))


@settings(max_examples=30, deadline=None)
@given(L=st.integers(1, 60), g=st.floats(0.0, 0.99), cw=st.floats(0.1, 3.0), cb=st.floats(0.0, 1.0),
       ap=st.floats(0.0, 2.0), am=st.floats(-1.0, 1.0), K0=st.floats(0.01, 10.0), n=st.integers(1, 5))
def test_pdlt_scale_invariant_trajectory_compiled_equals_numpy(L, g, cw, cb, ap, am, K0, n):
    seqs = tuple(np.full(L, v) for v in (g, cw, cb, ap, am))
    K = np.linspace(K0, 2 * K0, n)
    V = np.linspace(0.0, K0, n)
    ref = _numpy_trajectory(prr.kernel_vertex_scale_invariant, (K, V), seqs)
    traj = np.empty((L, 2, n))
    Kc, Vc = K.copy(), V.copy()
    comp.kernel_vertex_scale_invariant_run(Kc, Vc, *seqs, traj)
    _close(traj, ref, rtol=1e-14 * L)
    _close(np.array([Kc, Vc]), ref[-1], rtol=1e-14 * L)
    # no trajectory asked: the same final state
    Kn, Vn = K.copy(), V.copy()
    comp.kernel_vertex_scale_invariant_run(Kn, Vn, *seqs, np.empty((0, 2, n)))
    assert np.array_equal(Kn, Kc) and np.array_equal(Vn, Vc)


@settings(max_examples=20, deadline=None)
@given(L=st.integers(1, 40), g2=st.floats(0.0, 0.98), ap=st.floats(0.1, 2.0), am=st.floats(-1.0, 1.0))
def test_pdlt_corrected_scale_invariant_compiled_equals_numpy(L, g2, ap, am):
    seqs = (np.full(L, np.sqrt(g2)), np.full(L, ap), np.full(L, am))
    states = (np.zeros(1), np.zeros(1), np.ones(1))
    ref = _numpy_trajectory(pcr.vertex_corrected_scale_invariant, states, seqs)
    traj = np.empty((L, 3, 1))
    pcc.vertex_corrected_scale_invariant_run(*[s.copy() for s in states], *seqs, traj)
    _close(traj, ref, rtol=1e-14 * L)


@pytest.mark.parametrize("act", ["erf", "relu", "gelu"])
@pytest.mark.parametrize("suffix", ["", "_ntk", "_response"])
def test_engine_diagonal_compiled_equals_numpy(act, suffix):
    rng = np.random.default_rng(7)
    L, P = 64, 9
    seqs = (rng.uniform(0.5, 1.0, L), rng.uniform(0.0, 0.5, L), rng.uniform(0.0, 0.1, L))
    states = (rng.uniform(0.1, 3.0, P),) + ((rng.uniform(0.1, 3.0, P),) if suffix else ())
    ref = _numpy_trajectory(getattr(rrec, f"{act}_diagonal{suffix}"), states, seqs)
    traj = np.empty((L, len(states), P))
    getattr(rcomp, f"{act}_diagonal{suffix}_run")(*[s.copy() for s in states], *seqs, traj)
    _close(traj, ref, rtol=1e-14 * L)


@pytest.mark.parametrize("act", ["relu", "linear", "leaky_relu:0.3"])
def test_vertex_trajectory_backends_agree(act):
    a = vertex_trajectory(act, gamma=0.6, depth=300, backend="compiled")
    b = vertex_trajectory(act, gamma=0.6, depth=300, backend="numpy")
    _close(np.asarray(a.K), np.asarray(b.K), rtol=1e-14 * 300)
    _close(np.asarray(a.V), np.asarray(b.V), rtol=1e-14 * 300)
