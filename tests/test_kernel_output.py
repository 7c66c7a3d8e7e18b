"""`resprop kernel` output and input safety (issue 23, items 4 and 5): --out goes through
resprop.numeric.engine.output (checked before any work, atomic, sidecar manifest, lock; never over a file resprop
did not write or through a link), and --inputs / resprop.kernel's X are read and checked before anything is
allocated (resprop.numeric.engine.inputs).

The signal and race tests run the real command line in subprocesses; the rest call ``main`` in-process."""
import hashlib
import json
import os
import signal
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT
from interrupting import interrupt_at

import resprop
from resprop.numeric.cli import main
from resprop.numeric.engine import inputs as I
from resprop.numeric.engine.output import check_replaceable, lock_path, manifest_path
from resprop.numeric.engine.validation import ParameterError

BASE = ["--activation", "erf", "--depth", "3", "--sigma-w2", "1.5"]


def _x(tmp: Path, P: int = 5, d: int = 3, name: str = "X.npy") -> Path:
    path = tmp / name
    np.save(path, np.random.default_rng(P).normal(size=(P, d)))
    return path


def _run(capsys, *argv) -> tuple[int, str, list[str]]:
    code = main([str(a) for a in argv])
    cap = capsys.readouterr()
    return code, cap.out, [ln for ln in cap.err.splitlines() if ln.strip()]


def _kernel_argv(X, out, bias="0.1", *extra):
    return ["kernel", "--inputs", X, *BASE, "--sigma-b2", bias, "--out", out, *extra]


def _strays(tmp: Path, name: str = "K.npz") -> list[str]:
    """Temporaries and locks of resprop runs next to ``name``."""
    return sorted(p.name for p in tmp.iterdir()
                  if p.name.startswith(f".{name}.tmp-") or p.name.startswith(f".{name}.old-")
                  or p.name == lock_path(tmp / name).name)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _own_output(out: Path) -> None:
    """``out`` is resprop's complete output: its sidecar manifest names it with the right sha256."""
    side = manifest_path(out, "file")
    data = json.loads(side.read_text())
    assert data["generator"] == "resprop kernel" and data["files"] == {out.name: _sha(out)}
    check_replaceable(out, "file")
    with zipfile.ZipFile(out) as zf:
        assert zf.testzip() is None


# --------------------------------------------------------------------------- output path
def test_writes_through_output_py_with_manifest_and_rerun(tmp_path, capsys):
    X, out = _x(tmp_path), tmp_path / "K.npz"
    code, stdout, err = _run(capsys, *_kernel_argv(X, out, "0.1", "--ntk"))
    assert code == 0 and err == [] and f"wrote {out}: nngp, ntk (5 x 5)" in stdout
    _own_output(out)
    ref = resprop.kernel(np.load(X), "erf", 3, 1.5, 0.1, ntk=True)
    with np.load(out) as f:
        assert np.array_equal(f["nngp"], ref[0]) and np.array_equal(f["ntk"], ref[1])
    # rerunning into its own previous output replaces it
    code, stdout, err = _run(capsys, *_kernel_argv(X, out, "0.3"))
    assert code == 0 and err == []
    _own_output(out)
    with np.load(out) as f:
        assert list(f) == ["nngp"] and np.array_equal(f["nngp"], resprop.kernel(np.load(X), "erf", 3, 1.5, 0.3))
    assert sorted(p.name for p in tmp_path.iterdir()) == [".K.npz.resprop-manifest.json", "K.npz", "X.npy"]


def test_foreign_file_is_not_overwritten(tmp_path, capsys):
    X, out = _x(tmp_path), tmp_path / "K.npz"
    out.write_bytes(b"the user's own results\n")
    code, stdout, err = _run(capsys, *_kernel_argv(X, out))
    assert code == 2 and len(err) == 1 and err[0].startswith(f"resprop: error: out: {out}: ")
    assert "not written by resprop" in err[0] and stdout == ""
    assert out.read_bytes() == b"the user's own results\n" and _strays(tmp_path) == []
    assert not manifest_path(out, "file").exists()


def test_own_output_changed_since_is_not_overwritten(tmp_path, capsys):
    X, out = _x(tmp_path), tmp_path / "K.npz"
    assert _run(capsys, *_kernel_argv(X, out))[0] == 0
    np.savez(out, nngp=np.eye(2))  # the user replaced it with their own array
    kept = out.read_bytes()
    code, _, err = _run(capsys, *_kernel_argv(X, out))
    assert code == 2 and len(err) == 1 and "sha256 differs" in err[0] and out.read_bytes() == kept


@pytest.mark.parametrize("target", ["file", "dangling", "own-output"])
def test_symbolic_link_is_refused(target, tmp_path, capsys):
    X, out, real = _x(tmp_path), tmp_path / "K.npz", tmp_path / "real.npz"
    if target == "file":
        real.write_bytes(b"user data")
    elif target == "own-output":  # even a link to resprop's own output is not followed
        assert _run(capsys, *_kernel_argv(X, real))[0] == 0
    before = real.read_bytes() if real.exists() else None
    out.symlink_to(real.name)
    code, _, err = _run(capsys, *_kernel_argv(X, out))
    assert code == 2 and len(err) == 1 and "symbolic link" in err[0] and str(out) in err[0]
    assert out.is_symlink() and os.readlink(out) == real.name
    assert (real.read_bytes() if real.exists() else None) == before and _strays(tmp_path) == []


def test_foreign_siblings_are_left_alone(tmp_path, capsys):
    """The old code wrote K.npz.partial.npz and replaced a user file of that name; nothing but K.npz and its
    manifest is touched now."""
    X, out = _x(tmp_path), tmp_path / "K.npz"
    siblings = {"K.npz.partial.npz": b"user partial", "K.npz.bak": b"backup", ".K.npz.notes": b"notes",
                "K.npz.resprop-manifest.json": b"{}"}
    for name, data in siblings.items():
        (tmp_path / name).write_bytes(data)
    assert _run(capsys, *_kernel_argv(X, out))[0] == 0
    assert _run(capsys, *_kernel_argv(X, out, "0.2"))[0] == 0
    for name, data in siblings.items():
        assert (tmp_path / name).read_bytes() == data
    _own_output(out)
    assert _strays(tmp_path) == []


@pytest.mark.parametrize("bad,names", [("K.txt", "--out"), ("adir", "adir"), ("afile/K.npz", "afile"),
                                       ("K", "--out")])
def test_bad_out_paths(bad, names, tmp_path, capsys):
    X = _x(tmp_path)
    (tmp_path / "adir").mkdir()
    (tmp_path / "afile").write_text("user\n")
    if bad == "adir":
        bad = "adir.npz"
        (tmp_path / bad).mkdir()
        names = "is a directory"
    code, _, err = _run(capsys, *_kernel_argv(X, tmp_path / bad))
    assert code == 2 and len(err) == 1 and err[0].startswith("resprop: error: ") and names in err[0], err
    assert (tmp_path / "afile").read_text() == "user\n"


def test_out_is_checked_before_inputs_and_work(tmp_path, capsys, monkeypatch):
    """A refused --out wins over a missing --inputs and a depth of 10^6: nothing is read or computed (reading the
    inputs or computing the kernel would fail the test, whatever the machine's speed)."""
    import resprop.numeric.engine.inputs as inputs_module
    import resprop.numeric.engine.kernel as kernel_module

    def forbidden(*args, **kwargs):
        raise AssertionError("the inputs were read or the kernel computed before --out was refused")

    monkeypatch.setattr(inputs_module, "read_inputs", forbidden)
    monkeypatch.setattr(kernel_module, "kernel", forbidden)
    out = tmp_path / "K.npz"
    out.write_bytes(b"user")
    code, _, err = _run(capsys, "kernel", "--inputs", tmp_path / "missing.npy", "--activation", "erf",
                        "--depth", "1000000", "--sigma-w2", "1.5", "--sigma-b2", "0.1", "--out", out)
    assert code == 2 and len(err) == 1 and "out:" in err[0] and "missing.npy" not in err[0]
    big = _x(tmp_path, P=3000, d=2, name="big.npy")
    code, _, err = _run(capsys, "kernel", "--inputs", big, "--activation", "tanh", "--depth", "1000000",
                        "--sigma-w2", "1.5", "--sigma-b2", "0.1", "--ntk", "--out", out)
    assert code == 2 and "out:" in err[0]
    assert out.read_bytes() == b"user"


def test_held_lock_is_refused_naming_the_other_process(tmp_path, capsys):
    from resprop.numeric.engine.output import Publication

    X, out = _x(tmp_path), tmp_path / "K.npz"
    with Publication(out, "file", "test"):
        code, _, err = _run(capsys, *_kernel_argv(X, out))
        assert code == 2 and len(err) == 1
        assert f"another resprop run (pid {os.getpid()})" in err[0] and str(out) in err[0]
    assert not out.exists() and _strays(tmp_path) == []


# --------------------------------------------------------------------------- signals and races (subprocesses)
@pytest.mark.timeout(300)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_mid_run_keeps_previous_output(sig, tmp_path, capsys):
    X, out = _x(tmp_path, P=150, d=4), tmp_path / "K.npz"
    assert _run(capsys, *_kernel_argv(X, out))[0] == 0  # a previous output of resprop's
    before = out.read_bytes()
    lock = lock_path(out)

    def locked():  # what the signal meets: the lock held (output.py has installed its SIGTERM handler)
        assert lock.read_text().strip().isdigit()

    # the run pauses with its inputs read, just before the kernel is computed, and the signal lands there
    args = ["kernel", "--inputs", str(X), "--activation", "erf", "--depth", "1000", "--sigma-w2", "1.5",
            "--sigma-b2", "0.2", "--out", str(out)]
    done = interrupt_at(args, "computing", sig=sig, what="resprop kernel", while_paused=locked)
    assert done.returncode == 128 + sig, done.stderr[-2000:]
    assert "interrupted" in done.stderr and "Traceback" not in done.stderr and done.stdout == ""
    assert out.read_bytes() == before
    _own_output(out)
    assert _strays(tmp_path) == [] and sorted(p.name for p in tmp_path.iterdir()) == [
        ".K.npz.resprop-manifest.json", "K.npz", "X.npy"]


@pytest.mark.timeout(600)
def test_four_concurrent_runs_into_one_out(tmp_path):
    """Four `resprop kernel` processes with different --sigma-b2 into one --out: each exits 0 (it published) or 2
    (another run held the lock, or the path changed under it), never anything else; at least one publishes; the
    file at the end is a complete, manifest-checked output equal to the recomputed kernel of one run that exited
    0 (the only one when just one did); nothing is left behind."""
    X, out = _x(tmp_path, P=150, d=4), tmp_path / "K.npz"
    depth, biases = 8000, ["0.1", "0.2", "0.3", "0.4"]
    procs = [subprocess.Popen([sys.executable, "-m", "resprop.numeric.cli", "kernel", "--inputs", str(X),
                               "--activation", "erf", "--depth", str(depth), "--sigma-w2", "1.5", "--sigma-b2", b,
                               "--quiet", "--out", str(out)], cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for b in biases]
    try:
        results = [(p.wait(timeout=500), *p.communicate()) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    winners = [b for b, (rc, _, _) in zip(biases, results) if rc == 0]
    for b, (rc, stdout, stderr) in zip(biases, results):
        assert rc in (0, 2) and "Traceback" not in stderr, (b, rc, stderr)
        if rc == 0:
            assert f"wrote {out}: nngp" in stdout and stderr.strip() == ""
        else:
            lines = stderr.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith(f"resprop: error: out: {out}: "), lines
            assert stdout == ""
    assert winners, results
    _own_output(out)
    with np.load(out) as f:
        got = f["nngp"]
    Xa = np.load(X)
    matches = [b for b in biases if np.array_equal(got, resprop.kernel(Xa, "erf", depth, 1.5, float(b)))]
    assert len(matches) == 1 and matches[0] in winners, (matches, winners)
    if len(winners) == 1:
        assert matches == winners
    assert _strays(tmp_path) == [] and sorted(p.name for p in tmp_path.iterdir()) == [
        ".K.npz.resprop-manifest.json", "K.npz", "X.npy"]


# --------------------------------------------------------------------------- bad input files
def _header_only(path: Path, shape, descr="<f8", payload=b"\0" * 64) -> None:
    with open(path, "wb") as fh:
        np.lib.format.write_array_header_1_0(fh, {"descr": descr, "fortran_order": False, "shape": shape})
        fh.write(payload)


def _truncated(path: Path) -> None:
    np.save(path, np.ones((10, 3)))
    data = path.read_bytes()
    path.write_bytes(data[:-8])


BAD_FILES = {
    "empty": (lambda p: p.write_bytes(b""), "not a .npy"),
    "text": (lambda p: p.write_text("1 2 3\n4 5 6\n"), "not a .npy"),
    "npz": (lambda p: np.savez(p.with_suffix(".tmp.npz"), a=np.ones((2, 2))) or
            p.with_suffix(".tmp.npz").rename(p), "not a .npy"),
    "bad-header": (lambda p: p.write_bytes(b"\x93NUMPY\x01\x00\x10\x00{'descr': zzz}   \n"), "not a .npy"),
    "truncated": (_truncated, "truncated"),
    "header-1e12": (lambda p: _header_only(p, (10**6, 10**6)), "truncated"),
    "header-1e12-fortran": (lambda p: _header_only(p, (10**12, 1)), "truncated"),
    "object-pickled": (lambda p: np.save(p, np.array([[1.0, None]], dtype=object), allow_pickle=True), "objects"),
    "ragged": (lambda p: np.save(p, np.array([[1.0, 2.0], [3.0]], dtype=object), allow_pickle=True), "objects"),
    "1-D": (lambda p: np.save(p, np.ones(4)), "2-D"),
    "3-D": (lambda p: np.save(p, np.ones((2, 2, 2))), "2-D"),
    "0-D": (lambda p: np.save(p, np.float64(1.0)), "2-D"),
    "P=0": (lambda p: np.save(p, np.ones((0, 3))), "2-D"),
    "d_in=0": (lambda p: np.save(p, np.ones((3, 0))), "2-D"),
    "complex": (lambda p: np.save(p, np.ones((3, 2), complex)), "complex"),
    "strings": (lambda p: np.save(p, np.array([["1", "2"], ["3", "4"]])), "not numeric"),
    "bytes": (lambda p: np.save(p, np.array([[b"1", b"2"]])), "not numeric"),
    "bool": (lambda p: np.save(p, np.ones((3, 2), bool)), "boolean"),
    "structured": (lambda p: np.save(p, np.zeros((3, 2), dtype=[("a", "<f8")])), "structured"),
    "datetime": (lambda p: np.save(p, np.zeros((3, 2), dtype="datetime64[s]")), "not numeric"),
    "nan": (lambda p: np.save(p, np.array([[1.0, np.nan], [0.5, 1.0]])), "finite"),
    "inf": (lambda p: np.save(p, np.array([[1.0, np.inf]])), "finite"),
    "directory": (lambda p: p.mkdir(), "inputs"),
    "missing": (lambda p: None, "inputs"),
}


@pytest.mark.parametrize("kind", list(BAD_FILES))
def test_bad_inputs_file(kind, tmp_path, capsys):
    path, out = tmp_path / "X.npy", tmp_path / "K.npz"
    make, words = BAD_FILES[kind]
    make(path)
    code, stdout, err = _run(capsys, *_kernel_argv(path, out))
    assert code == 2 and len(err) == 1 and err[0].startswith("resprop: error: --inputs: "), err
    assert words in err[0] and stdout == ""
    assert not out.exists() and _strays(tmp_path) == []


def test_memory_refused_before_allocation(tmp_path, capsys, monkeypatch):
    """P = 40000 (the issue's case) with 16 GB available: the NNGP alone needs 1.5 x 8 P^2 = 19.2 GB (plus the
    128 MiB allowance of the general path)."""
    path, out = tmp_path / "X.npy", tmp_path / "K.npz"
    np.save(path, np.ones((40000, 1)))
    monkeypatch.setattr(I, "available_memory", lambda: 16 * 10**9)
    for extra, need in (([], 1.5), (["--ntk"], 2.5)):
        code, _, err = _run(capsys, *_kernel_argv(path, out, "0.1", *extra))
        assert code == 2 and len(err) == 1 and err[0].startswith("resprop: error: --inputs: P = 40000"), err
        x_bytes = 2 * 8 * 40000  # X as read and as float64
        assert f"need about {int(need * 8 * 40000**2) + 128 * 2**20 + x_bytes} bytes" in err[0], err
        assert "16000000000 bytes" in err[0]
    with pytest.raises(ParameterError) as info:
        resprop.kernel(np.ones((40000, 1)), "erf", 2, 1.5, 0.1)
    assert info.value.parameter == "X" and "bytes" in str(info.value)
    assert not out.exists()


def test_memory_refused_with_the_real_available_memory(tmp_path, capsys):
    have = I.available_memory()
    if have is None:
        pytest.skip("available memory unknown on this system")
    P = int(np.sqrt(have / (8 * I.PEAK_FACTOR[False]))) + 1000  # cannot fit, but the file itself is small
    path = tmp_path / "X.npy"
    np.save(path, np.zeros((P, 1)))
    code, _, err = _run(capsys, *_kernel_argv(path, tmp_path / "K.npz"))
    assert code == 2 and err[0].startswith(f"resprop: error: --inputs: P = {P} inputs") and "available" in err[0]


def test_header_is_read_before_the_data(tmp_path, monkeypatch):
    """A header that claims 10^12 elements is refused without reading (or allocating) the data."""
    path = tmp_path / "X.npy"
    _header_only(path, (10**6, 10**6))
    monkeypatch.setattr(np, "fromfile", lambda *a, **k: pytest.fail("data read before the header was checked"))
    with pytest.raises(ParameterError, match="truncated"):
        I.read_inputs(path)


@pytest.mark.parametrize("kind", ["int64", "int8", "uint16", "float32", "float16", "fortran"])
def test_good_inputs_files(kind, tmp_path, capsys):
    X = np.random.default_rng(3).normal(size=(6, 3))
    if kind == "fortran":
        saved = np.asfortranarray(X)
    elif kind.startswith(("int", "uint")):
        X = np.round(np.abs(X) * 3)
        saved = X.astype(kind)
    else:
        saved = X.astype(kind)
    path, out = tmp_path / "X.npy", tmp_path / "K.npz"
    np.save(path, saved)
    assert np.array_equal(I.read_inputs(path), saved.astype(np.float64))
    code, _, err = _run(capsys, *_kernel_argv(path, out))
    assert code == 0 and err == []
    with np.load(out) as f:
        assert np.array_equal(f["nngp"], resprop.kernel(saved.astype(np.float64), "erf", 3, 1.5, 0.1))


# --------------------------------------------------------------------------- the Python API
@pytest.mark.parametrize("X,words", [
    ([[1.0, 2.0], [3.0]], "X"),
    ([["a", "b"]], "not numeric"),
    (np.array([["1", "2"]]), "not numeric"),
    (np.ones((3, 2), bool), "boolean"),
    (np.ones((3, 2), complex), "complex"),
    (np.ones(3), "2-D"),
    (np.ones((2, 2, 2)), "2-D"),
    (np.ones((0, 2)), "2-D"),
    ([[1.0, None]], "X"),
    ([[1.0, {}]], "X"),
], ids=["ragged", "strings", "str-array", "bool", "complex", "1-D", "3-D", "empty", "None", "dict"])
def test_api_bad_X(X, words, tmp_path):
    with pytest.raises(ParameterError) as info:
        resprop.kernel(X, "erf", 2, 1.5, 0.1)
    assert info.value.parameter == "X" and words in str(info.value)


@pytest.mark.parametrize("name", ["sigma_w2", "sigma_b2", "gamma"])
@pytest.mark.parametrize("value", [True, False, np.bool_(True), np.array(True)], ids=repr)
def test_api_boolean_scalars_refused(name, value):
    kwargs = {"sigma_w2": 1.5, "sigma_b2": 0.1, "gamma": 1.0, name: value}
    with pytest.raises(ParameterError) as info:
        resprop.kernel(np.ones((2, 2)), "erf", 2, kwargs["sigma_w2"], kwargs["sigma_b2"], gamma=kwargs["gamma"])
    assert info.value.parameter == name and "boolean" in str(info.value)


def test_api_object_array_of_numbers_still_works():
    X = np.array([[1, 2.5], [0.5, 1]], dtype=object)
    assert np.array_equal(resprop.kernel(X, "erf", 2, 1.5, 0.1), resprop.kernel(X.astype(float), "erf", 2, 1.5, 0.1))


def test_check_kernel_memory_units(monkeypatch):
    monkeypatch.setattr(I, "available_memory", lambda: 10**9)
    # the in-place engine: 1.5 (2.5 with the NTK) float64 P x P arrays, plus the general path's allowance
    assert I.check_kernel_memory(1000, False) == int(1.5 * 8 * 10**6) + 128 * 2**20
    assert I.check_kernel_memory(1000, True) == int(2.5 * 8 * 10**6) + 128 * 2**20
    with pytest.raises(ParameterError, match="P = 10000 inputs") as info:
        I.check_kernel_memory(10000, True)
    assert info.value.parameter == "X" and f"{int(2.5 * 8 * 10**8) + 128 * 2**20} bytes" in str(info.value)
    monkeypatch.setattr(I, "available_memory", lambda: None)  # unknown: not refused
    assert I.check_kernel_memory(10**6, True) > 0


def test_available_memory_is_meminfo():
    have = I.available_memory()
    try:
        text = Path("/proc/meminfo").read_text()
    except OSError:
        pytest.skip("no /proc/meminfo")
    kb = int(next(ln for ln in text.splitlines() if ln.startswith("MemAvailable:")).split()[1])
    assert have is not None and abs(have - kb * 1024) < 0.2 * kb * 1024 + 2**28
