"""Output safety (issue 11, part 1): every command that writes output (reproduce, latex, figures, sweep .nc and
.zarr) never deletes what resprop did not write, replaces only its own previous output (checked by the
manifest of names and sha256), refuses bad output paths before any work with one line naming the path, leaves
the previous output and no temporary behind on SIGINT and SIGTERM, and two runs into one path never mix.

The slow builders (the LaTeX derivation, figure makers, the report) are monkeypatched in-process where the test
is about publication only; the signal and race tests run the real command line in subprocesses."""
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from interrupting import interrupt_at

import resprop.numeric.engine.output as O
from resprop.numeric.cli import main
from resprop.numeric.engine.output import MANIFEST_NAME, OutputPathError, Publication, check_replaceable

ROOT = Path(__file__).resolve().parent.parent

TINY = textwrap.dedent("""
    kind = "rho_star"
    [grid]
    depth = [3, 6]
    [fixed]
    input_kernel = 0.1
    sigma_w2 = 1.0
    sigma_b2 = 0.0
""")

#: a sweep that runs for a while (16 Monte Carlo chunks) so that it can be interrupted mid-way
SLOW = textwrap.dedent("""
    kind = "log_gaussian"
    [grid]
    width = [64, 128]
    depth = [48, 96]
    lam = [0.5, 1.0]
    balanced = [false, true]
    [fixed]
    alpha = 1.0
    samples = 1500
    [run]
    seed = 3
    chunk = 1
""")


def strays(out: Path) -> list[str]:
    """Hidden siblings of ``out`` other than a file output's manifest: temporaries, old copies, locks."""
    side = O.manifest_path(out, "file").name
    return sorted(p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.") and p.name != side)


def snapshot(path: Path) -> dict[str, bytes]:
    if path.is_file():
        return {path.name: path.read_bytes()}
    return {p.relative_to(path).as_posix(): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


# --------------------------------------------------------------------------- fake builders (publication only)
@pytest.fixture
def fast_builders(monkeypatch):
    """Cheap stand-ins for the slow builders of latex, figures and reproduce; ``calls`` counts their runs."""
    import resprop.derive.latex
    import resprop.numeric.report.reproduce as R
    import resprop.numeric.theories.lognormal.figures as lognormal_figures

    calls = []

    def export_latex(out, names=None, progress=None):
        calls.append("latex")
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        paths = [out / "a.tex", out / "b.tex"]
        for i, p in enumerate(paths):
            p.write_text(f"\\documentclass{{article}}\\begin{{document}}{i} {len(calls)}\\end{{document}}\n")
        return paths

    def make_figures(out, **kw):
        calls.append("figures")
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "lognormal_x.png").write_bytes(b"\x89PNG fake " + str(len(calls)).encode())
        return [out / "lognormal_x.png"]

    def build(work, theories, quick, quiet, check_generated, build_pdf, training=None):
        calls.append("reproduce")
        (work / "figures").mkdir()
        (work / "figures" / "f.png").write_bytes(b"png")
        return {"generator": R.GENERATOR, "run": len(calls), "summary": {"rows": 0, "agrees": 0, "documented_disagreements": 0,
                                                      "fails": 0, "seconds": 0.0}, "theories": {},
                "cross_theory": {"rows": []}}

    monkeypatch.setattr(resprop.derive.latex, "export_latex", export_latex)
    monkeypatch.setattr(lognormal_figures, "make_figures", make_figures)
    monkeypatch.setattr(R, "_build", build)
    monkeypatch.setattr(R, "render_html", lambda report: "<!doctype html><title>report</title>")
    return calls


COMMANDS = {
    "reproduce": lambda out: ["reproduce", "fischer", "--out", str(out), "--quick", "--quiet"],
    "latex": lambda out: ["latex", "--out", str(out)],
    "figures": lambda out: ["figures", "--out", str(out), "--only", "lognormal", "--quiet"],
}


@pytest.fixture
def tiny_spec(tmp_path):
    spec = tmp_path / "tiny.toml"
    spec.write_text(TINY)
    return spec


def _argv(cmd: str, out: Path, spec: Path | None = None) -> list[str]:
    if cmd.startswith("sweep"):
        return ["sweep", str(spec), "--out", str(out), "--workers", "1", "--quiet"]
    return COMMANDS[cmd](out)


ALL = ["reproduce", "latex", "figures", "sweep-nc", "sweep-zarr"]


def _target(tmp_path: Path, cmd: str) -> Path:
    return tmp_path / {"sweep-nc": "u.nc", "sweep-zarr": "u.zarr"}.get(cmd, "out")


# --------------------------------------------------------------------------- foreign files, own output, tampering
@pytest.mark.parametrize("cmd", ALL)
def test_foreign_files_in_the_target_are_never_deleted(cmd, tmp_path, fast_builders, tiny_spec, capsys):
    out = _target(tmp_path, cmd)
    out.mkdir()  # the reproducer: mkdir u.nc; echo x > u.nc/results.csv
    (out / "results.csv").write_text("x\n")
    assert main(_argv(cmd, out, tiny_spec)) == 2
    err = capsys.readouterr().err
    assert str(out) in err and len(err.strip().splitlines()) == 1, err
    assert (out / "results.csv").read_text() == "x\n" and snapshot(out) == {"results.csv": b"x\n"}
    assert fast_builders == []  # refused before any work
    assert strays(out) == [] and not Path(str(out) + ".parts").exists()


@pytest.mark.parametrize("cmd", ALL)
def test_previous_output_is_replaced_and_a_tampered_one_refused(cmd, tmp_path, fast_builders, tiny_spec, capsys):
    out = _target(tmp_path, cmd)
    assert main(_argv(cmd, out, tiny_spec)) == 0
    first = snapshot(out)
    kind = "file" if cmd == "sweep-nc" else "dir"
    assert O.manifest_path(out, kind).exists()
    check_replaceable(out, kind)  # the manifest matches what was written
    assert main(_argv(cmd, out, tiny_spec)) == 0  # resprop's own previous output: replaced
    assert strays(out) == []
    if not cmd.startswith("sweep"):
        assert snapshot(out) != first  # the fake builders write the run number: really replaced
    # tamper with one file resprop wrote: refused, and the changed file is kept as it is
    victim = out if kind == "file" else next(p for p in sorted(out.rglob("*")) if p.is_file()
                                              and p.name != MANIFEST_NAME)
    with open(victim, "ab") as fh:
        fh.write(b"user edit")
    edited = victim.read_bytes()
    capsys.readouterr()
    assert main(_argv(cmd, out, tiny_spec)) == 2
    err = capsys.readouterr().err
    assert "changed since resprop wrote" in err and str(out) in err
    assert victim.read_bytes() == edited and strays(out) == []


def test_empty_directory_may_be_used_and_sweep_outputs_reopen(tmp_path, tiny_spec):
    for name in ("e.zarr", "e2.nc"):
        out = tmp_path / name
        if name.endswith(".zarr"):
            out.mkdir()
        assert main(_argv("sweep", out, tiny_spec)) == 0
        ds = xr.open_zarr(out).load() if name.endswith(".zarr") else xr.open_dataset(out, engine="h5netcdf").load()
        assert ds.rho_star.shape == (2,) and np.isfinite(ds.rho_star.values).all()
        assert not Path(str(out) + ".parts").exists() and strays(out) == []


def test_manifest_rules(tmp_path):
    """The replaceability check itself: added, removed, changed files and empty subdirectories; symlinks."""
    out = tmp_path / "d"
    with Publication(out, "dir", "test") as pub:
        (pub.path / "sub").mkdir()
        (pub.path / "sub" / "x.txt").write_text("x")
        pub.commit()
    check_replaceable(out, "dir")
    (out / "sub" / "extra").mkdir()  # an empty directory resprop did not create
    with pytest.raises(OutputPathError, match="did not write .*sub/extra"):
        check_replaceable(out, "dir")
    (out / "sub" / "extra").rmdir()
    (out / "sub" / "x.txt").unlink()
    with pytest.raises(OutputPathError, match="missing sub/x.txt"):
        check_replaceable(out, "dir")
    (out / MANIFEST_NAME).write_text("not json")
    with pytest.raises(OutputPathError, match="did not write"):
        check_replaceable(out, "dir")
    link = tmp_path / "link"
    link.symlink_to(out)
    with pytest.raises(OutputPathError, match="symbolic link"):
        check_replaceable(link, "dir")
    assert (out / MANIFEST_NAME).read_text() == "not json"  # nothing was deleted by the checks


def test_sweep_parts_directory_with_foreign_files_is_refused(tmp_path, tiny_spec, capsys):
    out = tmp_path / "p.nc"
    parts = tmp_path / "p.nc.parts"
    parts.mkdir()
    (parts / "notes.txt").write_text("mine")
    assert main(_argv("sweep", out, tiny_spec)) == 2
    assert "notes.txt" in capsys.readouterr().err
    assert (parts / "notes.txt").read_text() == "mine" and not out.exists()


# --------------------------------------------------------------------------- bad output paths, before any work
def _bad_paths(tmp_path: Path, cmd: str):
    f = tmp_path / ("file.nc" if cmd == "sweep-zarr" else "file")
    f.write_text("a file")
    suffix = {"sweep-nc": ".nc", "sweep-zarr": ".zarr"}.get(cmd, "")
    is_file = tmp_path / f"plain{suffix}"
    is_file.write_text("a file")
    return {"is a file": (is_file, "is a file" if cmd != "sweep-nc" else "not written by resprop"),
            "under a file": (f / f"sub{suffix}", "lies under"),
            "under a file, deeper": (f / "a" / f"b{suffix}", "lies under")}


@pytest.mark.parametrize("cmd", ALL)
def test_bad_output_paths_are_one_line_errors_before_any_work(cmd, tmp_path, fast_builders, tiny_spec, capsys):
    for what, (out, message) in _bad_paths(tmp_path, cmd).items():
        before = out.read_bytes() if out.is_file() else None
        assert main(_argv(cmd, out, tiny_spec)) == 2, what
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and str(out) in err and message in err and "Traceback" not in err, (what, err)
        assert before is None or out.read_bytes() == before
    assert fast_builders == []


@pytest.mark.parametrize("cmd", ALL)
def test_unwritable_parent_is_a_one_line_error_before_any_work(cmd, tmp_path, fast_builders, tiny_spec, capsys,
                                                               monkeypatch):
    """Root ignores permission bits, so as root the denial is simulated by making os.access (the check the
    code uses) say no for this one directory; as another user the directory really is read-only."""
    parent = tmp_path / "ro"
    parent.mkdir()
    if os.geteuid() == 0:
        real = os.access
        monkeypatch.setattr(O.os, "access", lambda p, mode, **kw: False if Path(p) == parent else real(p, mode, **kw))
    else:
        parent.chmod(0o555)
    try:
        out = parent / _target(tmp_path, cmd).name
        assert main(_argv(cmd, out, tiny_spec)) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "permission denied" in err and str(out) in err, err
        assert list(parent.iterdir()) == [] and fast_builders == []
    finally:
        parent.chmod(0o755)


# --------------------------------------------------------------------------- concurrency
@pytest.mark.parametrize("cmd", ALL)
def test_second_run_into_a_locked_path_refuses_cleanly(cmd, tmp_path, fast_builders, tiny_spec, capsys):
    """While one run holds the lock of a path (here: this process, through the real Publication), another
    run into the same path exits 2 naming the other run's pid, and changes nothing."""
    out = _target(tmp_path, cmd)
    kind = "file" if cmd == "sweep-nc" else "dir"
    with Publication(out, kind, "test") as pub:
        assert main(_argv(cmd, out, tiny_spec)) == 2
        err = capsys.readouterr().err
        assert f"another resprop run (pid {os.getpid()})" in err and str(out) in err
        assert fast_builders == [] and not out.exists()
        assert pub.tmpdir.exists()
    assert strays(out) == [] and not out.exists()


def test_two_concurrent_sweeps_into_one_path_never_mix(tmp_path, tiny_spec):
    """Two real `resprop sweep` processes into one .zarr: each exits 0 (it published) or 2 (it found the other
    one's lock); at least one published; the result is one complete output matching its manifest; nothing
    is left behind."""
    out = tmp_path / "race.zarr"
    argv = [sys.executable, "-m", "resprop.numeric.cli", *_argv("sweep", out, tiny_spec)]
    procs = [subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    results = [(p.wait(timeout=120), p.communicate()) for p in procs]
    codes = sorted(rc for rc, _ in results)
    assert codes in ([0, 0], [0, 2]), results
    for rc, (_, err) in results:
        assert "Traceback" not in err
        if rc == 2:
            assert "another resprop run" in err
    check_replaceable(out, "dir")
    assert xr.open_zarr(out).rho_star.shape == (2,)
    assert strays(out) == [] and not Path(str(out) + ".parts").exists()


# --------------------------------------------------------------------------- SIGINT and SIGTERM
def _previous_report(out: Path) -> dict[str, bytes]:
    from resprop.numeric.report.reproduce import GENERATOR

    out.mkdir()
    (out / "report.json").write_text(json.dumps({"generator": GENERATOR, "summary": {"rows": 1, "fails": 0}}))
    (out / "index.html").write_text("<!doctype html><title>previous</title>")
    O.write_manifest(out, "dir", GENERATOR)
    return snapshot(out)


# SIGINT under -m slow: tests/test_reproduce.py::test_ctrl_c_keeps_the_previous_complete_report sends it in the
# default suite (26 s each; the default suite stays under 15 minutes on 2 cores)
@pytest.mark.parametrize("sig", [pytest.param(signal.SIGINT, marks=pytest.mark.slow), signal.SIGTERM],
                         ids=["SIGINT", "SIGTERM"])
def test_signal_during_reproduce_keeps_the_previous_report(sig, tmp_path):
    out = tmp_path / "report"
    before = _previous_report(out)

    def building():  # what the signal meets: the report half built in its temporary directory
        assert any((t / "figures").is_dir() and any(t.glob("latex/*.tex")) for t in tmp_path.glob(".report.tmp-*"))

    # the run pauses after the LaTeX export, before claims and figures, and the signal lands there
    done = interrupt_at(["reproduce", "abcd", "--out", str(out), "--quick", "--quiet"], "latex-exported", sig=sig,
                        while_paused=building)
    assert done.returncode == 128 + sig, done.stderr[-2000:]
    assert "interrupted" in done.stderr and "Traceback" not in done.stderr
    assert snapshot(out) == before
    check_replaceable(out, "dir")
    assert strays(out) == []


@pytest.mark.parametrize("sig,suffix", [(signal.SIGINT, ".nc"), (signal.SIGTERM, ".nc"),
                                        (signal.SIGTERM, ".zarr")], ids=["SIGINT-nc", "SIGTERM-nc", "SIGTERM-zarr"])
def test_signal_during_sweep_keeps_the_previous_output(sig, suffix, tmp_path, tiny_spec):
    out = tmp_path / f"s{suffix}"
    assert main(_argv("sweep", out, tiny_spec)) == 0
    kind = "dir" if suffix == ".zarr" else "file"
    before = snapshot(out), O.manifest_path(out, kind).read_bytes()
    slow = tmp_path / "slow.toml"
    slow.write_text(SLOW)
    parts = Path(str(out) + ".parts")
    def one_part():  # what the signal meets: the first chunk's part written, the others to come
        assert len(list(parts.glob("chunk-*.npz"))) == 1

    done = interrupt_at(["sweep", str(slow), "--out", str(out), "--workers", "1", "--quiet"], "part-written", sig=sig,
                        while_paused=one_part)
    assert done.returncode == 128 + sig, done.stderr[-2000:]
    assert "interrupted" in done.stderr and "resume" in done.stderr and "Traceback" not in done.stderr
    assert (snapshot(out), O.manifest_path(out, kind).read_bytes()) == before
    check_replaceable(out, kind)
    assert strays(out) == [] and any(parts.glob("chunk-*.npz"))  # the finished chunks are kept for resume


# --------------------------------------------------------------------------- sweep specs: validated up front
@pytest.mark.parametrize("spec,key", [
    ({"kind": "rho_star", "grid": {"depth": [10, 2_000_000]}, "fixed": {"input_kernel": 0.1, "sigma_w2": 1.0,
                                                                       "sigma_b2": 0.0}}, "grid.depth"),
    ({"kind": "log_gaussian", "grid": {"alpha": [1.0, 1e100]}, "fixed": {"width": 4, "depth": 2, "lam": 1.0,
                                                                        "samples": 10}}, "grid.alpha, fixed.lam"),
    ({"kind": "log_gaussian", "grid": {"width": [4, 10**12]}, "fixed": {"depth": 2, "alpha": 1.0, "lam": 1.0,
                                                                   "samples": 10}}, "grid.width"),
    ({"kind": "residual_mlp", "grid": {"samples": [10, 10**10]}, "fixed": {"width": 4, "depth": 2, "gamma": 0.5}},
     "grid.samples"),
    ({"kind": "residual_mlp", "grid": {"depth": [2, 10**8]}, "fixed": {"width": 4, "samples": 10, "gamma": 0.5}},
     "grid.depth"),
])
def test_sweep_domain_errors_name_the_key_before_any_worker(spec, key, tmp_path, monkeypatch):
    import resprop.numeric.sweep.runner as S

    monkeypatch.setattr(S, "_client", lambda *a, **k: pytest.fail("a worker was started"))
    with pytest.raises(ValueError) as err:
        S.run_sweep(spec, tmp_path / "x.nc", progress=False)
    assert str(err.value).startswith(f"{key}:"), str(err.value)
    assert list(tmp_path.iterdir()) == []  # no OUT.parts/, no temporary, no lock


def test_sweep_point_refused_by_its_computation_is_one_line_and_leaves_nothing(tmp_path, capfd, caplog):
    """Values whose trouble only the computation can see (chi_out overflowing float64 at one grid point) give
    one line naming the grid point, no worker traceback and no OUT.parts/ (grid point 0 is fine and finishes
    first: its part is removed too, as the same spec can never complete)."""
    spec = tmp_path / "bad.toml"
    spec.write_text(TINY.replace("sigma_w2 = 1.0", "").replace("depth = [3, 6]", "depth = [3]\nsigma_w2 = [1.0, 1e300]"))
    out = tmp_path / "b.nc"
    with caplog.at_level("INFO", logger="resprop.numeric.sweep.runner"):
        assert main(["sweep", str(spec), "--out", str(out), "--workers", "1", "--quiet"]) == 2
    assert [r.args for r in caplog.records if r.msg == "chunk %d computed"] == [(0,)]  # a part was written
    err = capfd.readouterr().err
    assert "resprop: error: grid point 1 (depth=3, sigma_w2=1e+300)" in err, err
    assert "Traceback" not in err and "Compute Failed" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.toml"]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_after_the_commit_reports_a_complete_output(sig, tmp_path, tiny_spec, monkeypatch, capsys):
    """An interrupt that lands after the output was renamed into place (here: while the parts are removed) must
    not say the output was "left as it was": it was written, in full."""
    import resprop.numeric.sweep.runner as runner

    def interrupt_after_commit(parts):
        raise O.Interrupted(sig)

    monkeypatch.setattr(runner, "_remove_parts", interrupt_after_commit)
    out = tmp_path / "late.nc"
    assert main(_argv("sweep", out, tiny_spec)) == 128 + sig
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"resprop: interrupted after {out} was written (it is complete)"]
    check_replaceable(out, "file")  # the manifest matches: a complete output
    assert O.published_here(out) and not O.published_here(tmp_path / "other.nc")
