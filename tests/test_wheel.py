"""The wheel (a normal `pip install .`) ships the templates and the generated tree under the resprop namespace,
and no top-level module called derive, numeric or generated.  .ci/run installs that wheel in a fresh virtual
environment and runs resprop derive --check, latex and reproduce from outside the checkout."""
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from resprop import registry
from resprop.derive.codegen import generated_files

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel_names(tmp_path_factory) -> set[str]:
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                           "--wheel-dir", str(out), str(ROOT)], capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        pytest.fail(f"pip wheel failed:\n{proc.stderr[-3000:]}")
    (whl,) = out.glob("resprop-*.whl")
    with zipfile.ZipFile(whl) as z:
        return set(z.namelist())


def test_wheel_contains_every_template(wheel_names):
    templates = sorted(p.name for p in (ROOT / "templates").glob("*.j2"))
    assert templates, "no templates in the source tree"
    missing = [t for t in templates if f"resprop/templates/{t}" not in wheel_names]
    assert not missing, missing


def _builtin() -> list:
    """resprop's own theories (registry.BUILTIN): an installed plugin's package is in its own wheel, not in resprop's."""
    return [th for th in registry.theories().values() if th.package in registry.BUILTIN]


def test_wheel_contains_the_generated_tree(wheel_names):
    """resprop's generated/ and each theory's own generated package, LaTeX and reference pages included."""
    expected = [rel for rel in generated_files(slugs=[*(th.slug for th in _builtin()), "foundation"])
                if not rel.startswith("docs/")]
    for suffix in (".py", ".tex", ".md"):
        assert any(rel.startswith(registry.OWN_PREFIX) and rel.endswith(suffix) for rel in expected), suffix
    assert any(rel.startswith("latex/") for rel in expected) and any(rel.endswith(".py") for rel in expected)

    def in_wheel(rel: str) -> str:
        if rel.startswith(registry.OWN_PREFIX):
            slug, _, own = rel.removeprefix(registry.OWN_PREFIX).partition("/")
            return f"{registry.theory(slug).generated_package.replace('.', '/')}/{own}"
        return f"resprop/generated/{rel}"

    missing = [in_wheel(rel) for rel in expected if in_wheel(rel) not in wheel_names]
    assert not missing, missing


def test_wheel_contains_every_theory_package_and_py_typed(wheel_names):
    assert "resprop/py.typed" in wheel_names and "resprop/registry.py" in wheel_names
    for th in _builtin():
        assert f"resprop/numeric/theories/{th.slug}/__init__.py" in wheel_names, th.slug
        for ref in th.derivations.values():
            module = ref.partition(":")[0]
            assert module.replace(".", "/") + ".py" in wheel_names, module


def test_wheel_installs_nothing_at_top_level_but_resprop(wheel_names):
    tops = {n.split("/", 1)[0] for n in wheel_names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"resprop"}
