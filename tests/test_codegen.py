"""Codegen: generated/ is fresh, staleness is detected, and generated functions equal their SymPy source."""
import importlib

import numpy as np
import pytest
import sympy as sp

from derive.codegen import generated_files, stale_files, write_generated
from derive.registry import THEORIES, derivation


def test_generated_is_fresh():
    stale = stale_files()
    assert not stale, "generated/ is stale; run `resprop derive`:\n" + "\n".join(stale)


def test_stale_file_is_detected(tmp_path):
    write_generated(tmp_path)
    assert stale_files(tmp_path) == {}
    target = tmp_path / "fischer.py"
    target.write_text(target.read_text().replace("rho**2", "rho**3", 1))
    stale = stale_files(tmp_path)
    assert list(stale) == ["fischer.py"]
    assert "rho**3" in stale["fischer.py"]


def test_headers_name_derivation_and_hash():
    for rel, text in generated_files().items():
        head = text.splitlines()[:4]
        assert any("Derivation:" in line for line in head), rel
        assert any("content-hash:" in line for line in head), rel


@pytest.mark.parametrize("theory", list(THEORIES))
def test_generated_functions_match_sympy(theory):
    """Evaluate each generated function and the SymPy result (lambdified with mpmath) at random domain points."""
    mod = importlib.import_module(f"generated.{theory}")
    rng = np.random.default_rng(7)
    for res in derivation(theory).results:
        fn = getattr(mod, res.name)
        args = []
        for inp in res.inputs:
            if inp.name == "K_ab":
                args.append(None)  # filled below from K_aa, K_bb
            elif inp.name in ("L", "d_in", "N"):
                args.append(float(rng.integers(2, 60)))
            elif inp.name == "target_variance":
                args.append(2.0 + rng.random())
            else:  # a random point inside the stated (parsed) domain
                dom = inp.parsed
                if np.isfinite(dom.lo) and np.isfinite(dom.hi):
                    args.append(dom.lo + (dom.hi - dom.lo) * (0.05 + 0.9 * rng.random()))
                elif np.isfinite(dom.lo):
                    args.append(dom.lo + 0.5 + rng.random())
                else:
                    args.append(0.05 + rng.random())
        names = res.argnames
        if "K_ab" in names:
            ia, ib, ic = names.index("K_aa"), names.index("K_bb"), names.index("K_ab")
            args[ic] = 0.8 * (2 * rng.random() - 1) * np.sqrt(args[ia] * args[ib])
        expected = sp.lambdify([i.symbol for i in res.inputs], res.expr, "mpmath")(*args)
        got = fn(*args)
        assert np.isclose(float(got), float(expected), rtol=1e-12, atol=0), res.name


def test_generated_functions_broadcast():
    import generated.fischer as gen
    import generated.gaussian as g

    K = np.array([[0.3, 0.1, 0.05], [0.1, 0.4, 0.2], [0.05, 0.2, 0.5]])
    d = np.diag(K)
    pp = g.erf_mean_phi_phi(d[:, None], d[None, :], K)
    assert pp.shape == (3, 3)
    assert np.allclose(pp, pp.T)
    rho = np.linspace(0.1, 1, 5)[:, None, None]
    assert gen.residual_kernel(rho, 1.2, 0.1, pp).shape == (5, 3, 3)
    L = np.array([10, 50, 100])[:, None]
    assert gen.rho_star_linearised(L, np.array([1.0, 1.5]), 0.05, 4 / np.pi, 0.05, 0.5).shape == (3, 2)
