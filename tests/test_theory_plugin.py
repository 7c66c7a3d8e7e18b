"""The worked plugin example (examples/theory-plugin/, issue 26 item 5) as a user installs it: the resprop wheel and
the plugin's wheel in a fresh virtual environment, the main commands run from a directory outside the checkout, then
the plugin uninstalled and resprop checked clean.  .ci/run's wheel section does the same (plus the conformance
suite and the plugin's own tests).

Slow (about two minutes: the wheels, a virtual environment with resprop's dependencies, the LaTeX export of every
theory): ``python -m pytest -m slow tests/test_theory_plugin.py``.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = ROOT / "examples" / "theory-plugin"
SLUG, DISTRIBUTION = "schoenholz", "resprop-schoenholz"


def _run(argv, cwd, timeout=900, check=True) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["MPLBACKEND"] = "Agg"
    proc = subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        pytest.fail(f"{' '.join(map(str, argv))} exited {proc.returncode}\n--- stdout\n{proc.stdout[-3000:]}\n"
                    f"--- stderr\n{proc.stderr[-3000:]}")
    return proc


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> dict[str, Path]:
    """A fresh virtual environment (no system site-packages) with the resprop wheel and the plugin's wheel."""
    work = tmp_path_factory.mktemp("plugin")
    dist, source = work / "dist", work / "theory-plugin"
    # build from a copy: setuptools writes build/ and *.egg-info next to the sources
    shutil.copytree(PLUGIN, source, ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__",
                                                                   ".pytest_cache"))
    for project in (ROOT, source):
        _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "--wheel-dir",
              dist, project], cwd=work)
    (resprop_whl,) = dist.glob("resprop-*.whl")
    (plugin_whl,) = dist.glob("resprop_schoenholz-*.whl")
    _run([sys.executable, "-m", "venv", work / "venv"], cwd=work)
    bin_ = work / "venv" / "bin"
    _run([bin_ / "python", "-m", "pip", "install", "--quiet", resprop_whl, plugin_whl], cwd=work)
    outside = work / "outside"
    outside.mkdir()
    return {"bin": bin_, "outside": outside, "plugin_whl": plugin_whl}


def test_the_plugin_wheel_holds_its_generated_code(venv):
    import zipfile

    with zipfile.ZipFile(venv["plugin_whl"]) as z:
        names = set(z.namelist())
    for rel in ("__init__.py", "schoenholz.py", "parameters.py", "latex/schoenholz.tex", "kernels.md",
                "parameters.md", "fingerprint.json"):
        assert f"resprop_schoenholz/generated/{rel}" in names, rel
    assert not any(n.startswith(("resprop/", "tests/")) for n in names)


def test_resprop_lists_and_runs_the_installed_plugin(venv):
    resprop, out = venv["bin"] / "resprop", venv["outside"]
    found = _run([venv["bin"] / "python", "-c", "import resprop, resprop_schoenholz; "
                                                "print(resprop.__file__); print(resprop_schoenholz.__file__)"], out)
    assert str(ROOT) not in found.stdout, f"the venv imports the checkout: {found.stdout}"
    listed = _run([resprop, "theories"], out)
    assert SLUG in listed.stdout and "BROKEN" not in listed.stdout and "warning" not in listed.stderr
    entries = {e.get("slug", e.get("name")): e for e in json.loads(_run([resprop, "theories", "--json"], out).stdout)}
    assert entries[SLUG]["generated_package"] == "resprop_schoenholz.generated"
    assert not [e for e in entries.values() if "broken" in e]
    assert "up to date" in _run([resprop, "derive", "--check"], out).stdout
    _run([resprop, "reproduce", SLUG, "--quick", "--quiet", "--out", "report"], out)
    report = json.loads((out / "report" / "report.json").read_text())
    rows = report["theories"][SLUG]["rows"]
    assert rows and all(r["verdict"] == "agrees" for r in rows), [(r["claim"], r["verdict"]) for r in rows]
    assert (out / "report" / "index.html").is_file()
    _run([resprop, "latex", "--out", "tex"], out)
    assert r"\xi_{c}" in (out / "tex" / f"{SLUG}.tex").read_text()
    scales = json.loads(_run([resprop, "schoenholz-depth-scales", "--sigma-w2", "2.5", "--sigma-b2", "0.05", "--json"],
                             out).stdout)
    assert scales["phase"] == "chaotic"
    bad = _run([resprop, "schoenholz-depth-scales", "--sigma-w2", "-1", "--sigma-b2", "0.05"], out, check=False)
    assert bad.returncode == 2 and "sigma_w2" in bad.stderr and "Traceback" not in bad.stderr


def test_uninstalling_the_plugin_leaves_resprop_clean(venv):
    resprop, out = venv["bin"] / "resprop", venv["outside"]
    _run([venv["bin"] / "python", "-m", "pip", "uninstall", "--quiet", "--yes", DISTRIBUTION], out)
    assert "up to date" in _run([resprop, "derive", "--check"], out).stdout
    listed = _run([resprop, "theories"], out)
    assert SLUG not in listed.stdout and "BROKEN" not in listed.stdout and "warning" not in listed.stderr
    gone = _run([resprop, "schoenholz-depth-scales", "--sigma-w2", "1", "--sigma-b2", "0.1"], out, check=False)
    assert gone.returncode == 2 and "Traceback" not in gone.stderr
