"""Codegen: generated/ is fresh, staleness is detected, and generated functions equal their SymPy source."""
import importlib

import numpy as np
import pytest
import sympy as sp

from resprop.derive.codegen import content_hash, generated_files, recorded_hash_problem, stale_files, write_generated
from resprop.registry import derivation, derivations, generated_module

THEORIES = derivations()  # every derivation (foundation first), by name


@pytest.fixture(scope="module")
def rendered() -> dict[str, str]:
    """Everything `resprop derive` writes, rendered once for this module (a render takes 10-20 s)."""
    return generated_files()


@pytest.fixture
def cached_render(rendered, monkeypatch):
    """stale_files / write_generated against the module's single render instead of rendering again."""
    import resprop.derive.codegen as codegen

    monkeypatch.setattr(codegen, "generated_files", lambda slugs=None: rendered)
    return rendered


def test_generated_is_fresh():
    stale = stale_files()
    assert not stale, "generated/ is stale; run `resprop derive`:\n" + "\n".join(stale)


def test_stale_file_is_detected(tmp_path, cached_render):
    write_generated(tmp_path)
    assert stale_files(tmp_path) == {}
    target = tmp_path / "theories/fischer/fischer.py"
    target.write_text(target.read_text().replace("rho**2", "rho**3", 1))
    stale = stale_files(tmp_path)
    assert list(stale) == ["theories/fischer/fischer.py"]
    assert "rho**3" in stale["theories/fischer/fischer.py"]


def test_every_recorded_hash_matches_its_body(rendered):
    """Each fresh render and each file on disk passes the on-disk check, and the check reproduces _render's hash:
    the file's text with its recorded hash blanked, hashed, gives the recorded hash."""
    from resprop.derive.codegen import file_path

    for rel, text in rendered.items():
        assert recorded_hash_problem(text) is None, rel
        recorded = next(line for line in text.splitlines() if "content-hash: " in line).split("content-hash: ")[1]
        recorded = recorded.split()[0]
        assert len(recorded) == 16 and content_hash(text.replace(recorded, "", 1)) == recorded, rel
        path = file_path(rel)
        if path is not None:
            assert recorded_hash_problem(path.read_text()) is None, rel


def test_templates_use_content_hash_once():
    """recorded_hash_problem blanks one hash on the header line; that mirrors _render only while every template
    renders ``content_hash`` exactly once."""
    from resprop.derive.codegen import environment

    env = environment()
    used = 0
    for name in env.list_templates():
        source = env.loader.get_source(env, name)[0]
        if "content_hash" in source:
            assert source.count("content_hash") == 1, name
            used += 1
    assert used >= 6


@pytest.mark.parametrize("rel", ["theories/fischer/fischer.py", "theories/fischer/latex/fischer.tex", "docs/reference/kernels.md",
                                 "theories/fischer/kernels.md"])
def test_hand_edited_file_fails_its_recorded_hash(tmp_path, rel, cached_render):
    write_generated(tmp_path)
    assert stale_files(tmp_path) == {}  # untouched copies: neither a diff nor a hash mismatch
    target = tmp_path / rel
    text = target.read_text()
    assert recorded_hash_problem(text) is None
    edited = text.replace("\n", "\n\n", 10)[:-1] + "x\n"  # a few blank lines and one extra character
    target.write_text(edited)
    problem = recorded_hash_problem(edited)
    assert problem is not None and problem.startswith("hash mismatch — edited by hand")
    stale = stale_files(tmp_path)
    assert list(stale) == [rel]
    assert "hash mismatch — edited by hand" in stale[rel].splitlines()[0]


def test_hash_line_removed_or_blanked_is_reported(tmp_path, cached_render):
    write_generated(tmp_path)
    target = tmp_path / "gaussian.py"
    text = target.read_text()
    recorded = text.split("content-hash: ")[1].split()[0]
    target.write_text(text.replace(f"# content-hash: {recorded}\n", "", 1))
    assert "no content-hash line" in stale_files(tmp_path)["gaussian.py"]
    target.write_text(text.replace(recorded, "", 1))  # exactly the body _render hashed: still not its hash
    assert stale_files(tmp_path)["gaussian.py"].startswith("generated/gaussian.py: hash mismatch — edited by hand")


def test_stale_but_consistent_file_is_not_a_hash_mismatch(tmp_path, cached_render):
    """A file written by an older derivation (body and hash consistent, but not today's render) is stale with a
    plain diff, not flagged as edited by hand."""
    write_generated(tmp_path)
    target = tmp_path / "theories/fischer/fischer.py"
    text = target.read_text()
    recorded = text.split("content-hash: ")[1].split()[0]
    body = text.replace(recorded, "", 1).replace("rho**2", "rho**3", 1)
    older = body.replace("# content-hash: \n", f"# content-hash: {content_hash(body)}\n", 1)
    assert older != text and recorded_hash_problem(older) is None
    target.write_text(older)
    stale = stale_files(tmp_path)
    assert list(stale) == ["theories/fischer/fischer.py"] and "hash mismatch" not in stale["theories/fischer/fischer.py"]
    assert "rho**3" in stale["theories/fischer/fischer.py"]


def test_headers_name_derivation_and_hash(rendered):
    for rel, text in rendered.items():
        head = text.splitlines()[:4]
        assert any("Derivation:" in line for line in head), rel
        assert any("content-hash:" in line for line in head), rel


@pytest.mark.parametrize("theory", list(THEORIES))
def test_generated_functions_match_sympy(theory):
    """Evaluate each generated function and the SymPy result (lambdified with mpmath) at random domain points."""
    mod = importlib.import_module(generated_module(theory))
    rng = np.random.default_rng(7)
    for res in derivation(theory).results:
        fn = getattr(mod, res.name)
        args = []
        for inp in res.inputs:
            if inp.parsed.kind == "covariance":
                args.append(None)  # filled below from its two variances
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
        for ic, inp in enumerate(res.inputs):  # a covariance inside |K_ab| <= sqrt(K_aa K_bb), of any names
            if inp.parsed.kind == "covariance":
                ia, ib = names.index(inp.parsed.var_a), names.index(inp.parsed.var_b)
                args[ic] = 0.8 * (2 * rng.random() - 1) * np.sqrt(args[ia] * args[ib])
        expected = sp.lambdify([i.symbol for i in res.inputs], res.expr, "mpmath")(*args)
        got = fn(*args)
        assert np.isclose(float(got), float(expected), rtol=1e-12, atol=0), res.name


def test_generated_functions_broadcast():
    import resprop.generated.gaussian as g
    import resprop.numeric.theories.fischer.generated.fischer as gen

    K = np.array([[0.3, 0.1, 0.05], [0.1, 0.4, 0.2], [0.05, 0.2, 0.5]])
    d = np.diag(K)
    pp = g.erf_mean_phi_phi(d[:, None], d[None, :], K)
    assert pp.shape == (3, 3)
    assert np.allclose(pp, pp.T)
    rho = np.linspace(0.1, 1, 5)[:, None, None]
    assert gen.residual_kernel(rho, 1.2, 0.1, pp).shape == (5, 3, 3)
    L = np.array([10, 50, 100])[:, None]
    assert gen.rho_star_linearised(L, np.array([1.0, 1.5]), 0.05, 4 / np.pi, 0.05, 0.5).shape == (3, 2)
