"""resprop sweep: Dask grid sweeps with deterministic seeds, resumable parts and labelled output."""
import copy
import logging
import signal
import sys
import textwrap
import tomllib
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from interrupting import interrupt_at

from resprop.numeric.engine.validation import ParameterError
from resprop.numeric.sweep.runner import cli_sweep, dumps_toml, load_spec, normalize_spec, run_sweep
from resprop.numeric.theories.fischer import field_theory as F

ROOT = Path(__file__).resolve().parent.parent

LG = {"kind": "log_gaussian",
      "grid": {"width": [16, 32], "depth": [4, 8], "balanced": [False, True]},
      "fixed": {"alpha": 1.0, "lam": 0.7, "samples": 200},
      "run": {"seed": 7, "chunk": 3}}

RS = {"kind": "rho_star",
      "grid": {"depth": [5, 12], "sigma_w2": [1.0, 1.5], "activation": ["erf", "relu"]},
      "fixed": {"input_kernel": 0.05, "sigma_b2": 0.05, "input_kernel_offdiag": 0.02},
      "run": {"chunk": 3}}


def with_run(spec, **run):
    s = copy.deepcopy(spec)
    s["run"].update(run)
    return s


def assert_same_data(a: xr.Dataset, b: xr.Dataset):
    assert set(a.data_vars) == set(b.data_vars)
    for name in a.data_vars:
        x, y = a[name].values, b[name].values
        assert x.dtype == y.dtype and np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), name  # NaN: no maximum
    for name in a.coords:
        assert np.array_equal(a[name].values, b[name].values), name


@pytest.fixture(scope="module")
def lg_reference(tmp_path_factory):
    """The log_gaussian sweep on one worker (the reference for bit-identity)."""
    return run_sweep(LG, tmp_path_factory.mktemp("ref") / "lg.nc", workers=1, progress=False)


# --------------------------------------------------------------------------- (a) bit-identical
def test_bit_identical_across_workers_and_chunking(lg_reference, tmp_path):
    two = run_sweep(with_run(LG, chunk=1), tmp_path / "lg2.nc", workers=2, progress=False)
    assert_same_data(lg_reference, two)
    assert np.isfinite(two.mean_G.values).all() and (two.dead.values == 0).all()
    # different points draw different streams; the same seed reproduces them
    assert len(np.unique(two.mean_G.values)) == two.mean_G.size
    rs1 = run_sweep(RS, tmp_path / "rs1.nc", workers=1, progress=False)
    rs2 = run_sweep(with_run(RS, chunk=2), tmp_path / "rs2.nc", workers=2, progress=False)
    assert_same_data(rs1, rs2)


def test_seed_changes_monte_carlo(lg_reference, tmp_path):
    other = run_sweep(with_run(LG, seed=8), tmp_path / "lg.nc", workers=1, progress=False)
    assert not np.array_equal(other.mean_G.values, lg_reference.mean_G.values)
    assert np.array_equal(other.theory_var_G.values, lg_reference.theory_var_G.values)


# --------------------------------------------------------------------------- (e) existing scheduler
def test_existing_scheduler_with_process_workers(lg_reference, tmp_path):
    from distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                      silence_logs=logging.ERROR) as cluster:
        ds = run_sweep(LG, tmp_path / "lg.zarr", scheduler=cluster.scheduler_address, progress=False)
    assert_same_data(lg_reference, ds)
    assert_same_data(lg_reference, xr.open_zarr(tmp_path / "lg.zarr").load())
    with pytest.raises(ParameterError) as err:
        run_sweep(LG, tmp_path / "x.nc", scheduler=cluster.scheduler_address, workers=2, progress=False)
    assert err.value.parameter == "workers"


# --------------------------------------------------------------------------- (b) interrupt and resume
RESUME = {"kind": "log_gaussian",
          "grid": {"width": [64, 128], "depth": [48, 96], "lam": [0.5, 1.0], "balanced": [False, True]},
          "fixed": {"alpha": 1.0, "samples": 1500},
          "run": {"seed": 3, "chunk": 1}}


def test_interrupt_and_resume(tmp_path, caplog):
    out = tmp_path / "resume.nc"
    parts = tmp_path / "resume.nc.parts"
    script = textwrap.dedent(f"""
        from resprop.numeric.sweep.runner import run_sweep
        run_sweep({RESUME!r}, {str(out)!r}, workers=1, progress=False)
    """)

    def three_parts():  # what the kill meets
        assert len(list(parts.glob("chunk-*.npz"))) == 3

    # killed where it pauses after writing its third part (tests/interrupting.py): nothing more is written
    done = interrupt_at([], "part-written:3", sig=signal.SIGKILL, what="the sweep",
                        command=[sys.executable, "-c", script], while_paused=three_parts)
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
    assert not out.exists()
    n_chunks = 16
    kept = sorted(parts.glob("chunk-*.npz"))
    assert len(kept) == 3
    kept_ids = {int(p.stem.split("-")[1]) for p in kept}
    mtimes = {p: p.stat().st_mtime_ns for p in kept}
    assert (parts / "manifest.json").exists()

    # a different spec must not pick up these parts
    with pytest.raises(ParameterError) as err:
        run_sweep(with_run(RESUME, seed=4), out, workers=1, progress=False)
    assert err.value.parameter == "out"

    seen = []

    class Watch(logging.Handler):  # the kept parts are untouched while the rest are computed
        def emit(self, record):
            seen.append(all(p.stat().st_mtime_ns == t for p, t in mtimes.items()))

    watch = Watch(level=logging.INFO)
    logger = logging.getLogger("resprop.numeric.sweep.runner")
    logger.addHandler(watch)
    try:
        with caplog.at_level(logging.INFO, logger="resprop.numeric.sweep.runner"):
            resumed = run_sweep(RESUME, out, workers=2, progress=False)
    finally:
        logger.removeHandler(watch)
    computed = {r.args[0] for r in caplog.records if r.msg == "chunk %d computed"}
    assert computed.isdisjoint(kept_ids) and computed | kept_ids == set(range(n_chunks))
    assert len(computed) == n_chunks - len(kept) and seen and all(seen)
    assert out.exists() and not parts.exists()

    fresh = run_sweep(RESUME, tmp_path / "fresh.nc", workers=1, progress=False)
    assert_same_data(fresh, resumed)
    assert_same_data(fresh, xr.open_dataset(out, engine="h5netcdf").load())


def test_ctrl_c_on_the_cli_keeps_parts_and_resumes(tmp_path):
    """SIGINT (Ctrl-C) to `resprop sweep` on a 2-worker local cluster: exit 130 with a resume hint, no output
    file (complete or partial), every kept part readable; rerunning the same command finishes the sweep, and
    the result equals an uninterrupted one."""
    spec_file = tmp_path / "spec.toml"
    spec_file.write_text(dumps_toml(RESUME))
    out = tmp_path / "ctrlc.nc"
    parts = tmp_path / "ctrlc.nc.parts"
    done = interrupt_at(["sweep", str(spec_file), "--workers", "2", "--out", str(out)], "part-written:2",
                        what="sweep")
    err = done.stderr
    assert done.returncode == 130, err[-2000:]
    assert "Traceback" not in err and "resume" in err
    assert not out.exists() and not list(tmp_path.glob(".ctrlc.nc.tmp-*"))
    kept = sorted(parts.glob("chunk-*.npz"))
    assert kept
    for part in kept:  # every kept part is a complete archive
        with np.load(part) as z:
            assert len(z.files) > 0
    assert cli_sweep(str(spec_file), str(out), workers=1, quiet=True) == 0
    fresh = run_sweep(RESUME, tmp_path / "fresh.nc", workers=1, progress=False)
    assert_same_data(fresh, xr.open_dataset(out, engine="h5netcdf").load())


# --------------------------------------------------------------------------- (c), (d) output files
@pytest.fixture(scope="module")
def rs_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("rs")
    ds = run_sweep(RS, d / "rs.nc", workers=2, progress=False)
    run_sweep(RS, d / "rs.zarr", workers=1, progress=False)
    return ds, d / "rs.nc", d / "rs.zarr"


@pytest.mark.parametrize("which", ["nc", "zarr"])
def test_output_reopens_with_coords_and_attrs(rs_files, which):
    ds, nc, zarr = rs_files
    back = (xr.open_dataset(nc, engine="h5netcdf") if which == "nc" else xr.open_zarr(zarr)).load()
    xr.testing.assert_identical(back, ds)
    assert list(back["rho_star"].dims) == ["depth", "sigma_w2", "activation"]
    assert back.depth.values.tolist() == [5, 12] and back.activation.values.tolist() == ["erf", "relu"]
    assert back.sigma_w2.dtype == np.float64 and back.depth.dtype == np.int64
    assert float(back.input_kernel) == 0.05 and float(back.input_kernel_offdiag) == 0.02  # fixed values as scalar coords
    for name in ("rho_star", "rho_star_offdiag", "chi_out_max"):
        assert {"units", "description", "equation"} <= set(back[name].attrs)
    attrs = back.attrs
    assert attrs["kind"] == "rho_star" and attrs["resprop_version"] and attrs["git_commit"]
    spec = tomllib.loads(attrs["spec"])  # the canonical spec round-trips
    assert spec["grid"]["activation"] == ["erf", "relu"] and "activation" not in spec["fixed"]
    assert normalize_spec(spec).sha256 == attrs["spec_sha256"] == normalize_spec(RS).sha256
    if which == "nc":
        assert not Path(str(nc) + ".parts").exists()


def test_rho_star_matches_direct_calls(rs_files):
    ds = rs_files[0]
    for depth, sw, act in [(5, 1.0, "erf"), (12, 1.5, "relu"), (12, 1.0, "erf")]:
        direct = F.rho_star(depth, 0.05, sw, 0.05, input_kernel_offdiag=0.02, activation=act)
        point = ds.sel(depth=depth, sigma_w2=sw, activation=act)
        # no interior maximum: None from rho_star, NaN in the dataset
        same = lambda a, b: np.array_equal(np.asarray(a, dtype=float), np.asarray(b, dtype=float),  # noqa: E731
                                           equal_nan=True)
        assert same(point.rho_star, direct.rho_star[0])
        assert same(point.rho_star_offdiag, direct.rho_star_offdiag[0])
        assert same(point.chi_out_max, direct.rho_star_chi_out[0])
        assert int(point.rho_star_grid_index) == int(direct.rho_star_grid_index[0])


RM = {"kind": "residual_mlp",
      "grid": {"width": [48, 96], "gamma": [0.0, 0.5], "activation": ["relu", "tanh"]},
      "fixed": {"depth": 7, "samples": 3000},
      "run": {"seed": 11, "chunk": 3}}


@pytest.fixture(scope="module")
def rm_sweep(tmp_path_factory):
    return run_sweep(RM, tmp_path_factory.mktemp("rm") / "rm.nc", workers=2, progress=False)


def test_residual_mlp_points_are_direct_calls_with_their_seed(rm_sweep):
    """Each grid point is simulate_residual_mlp with SeedSequence(seed, spawn_key=(flat index,)) at the critical
    C_W, and the recursions of resprop.numeric.theories.pdlt.residual_mlp."""
    from resprop.numeric.engine import mc_estimators as est
    from resprop.numeric.engine import monte_carlo as mc
    from resprop.numeric.theories.pdlt import residual_mlp as rm
    shape = tuple(len(v) for v in RM["grid"].values())
    for n, gamma, act in [(48, 0.0, "relu"), (96, 0.5, "tanh")]:
        idx = [RM["grid"]["width"].index(n), RM["grid"]["gamma"].index(gamma), RM["grid"]["activation"].index(act)]
        flat = int(np.ravel_multi_index(idx, shape))
        C_W = float(rm.critical_C_W(gamma, act))
        s = mc.simulate_residual_mlp(width=n, depth=7, gamma=gamma, C_W=C_W, activation=act, samples=3000,
                                     seed=np.random.SeedSequence(11, spawn_key=(flat,)))
        v = est.four_point_vertex(s)
        th = rm.vertex_trajectory(act, gamma=gamma, depth=7)
        point = rm_sweep.sel(width=n, gamma=gamma, activation=act)
        assert float(point.V_over_nK2) == float(v["V_over_nK2"][-1]) and float(point.K) == float(v["K"][-1])
        assert float(point.C_W) == C_W
        assert float(point.theory_V_over_nK2) == pytest.approx(th.V_over_K2[-1] / n, rel=1e-14)


def test_residual_mlp_tanh_vertex_matches_recursion(rm_sweep):
    """Physics of the sweep's output: for tanh, the Monte Carlo V/(nK^2) at depth 7 (PDLT's L = 8) agrees with the iterated B.26
    within 4 SE plus a 10% systematic allowance (the 1/n expansion; measured gaps 7.6%/3.7% at n = 32/64 for
    L = 16, README finding 3), and the kernel with B.12 within 4 SE plus 2/n relative."""
    t = rm_sweep.sel(activation="tanh")
    assert np.all(np.abs(t.V_over_nK2 - t.theory_V_over_nK2) <= 4 * t.V_over_nK2_se + 0.10 * t.theory_V_over_nK2)
    assert np.all(np.abs(t.K - t.theory_K) <= 4 * t.K_se + 2 / t.width * t.theory_K)


# --------------------------------------------------------------------------- (f) validation
def _spec(**changes):
    s = copy.deepcopy(RS)
    for path, value in changes.items():
        table, _, key = path.partition("__")
        if not key:
            if value is None:
                s.pop(table)
            else:
                s[table] = value
        elif value is None:
            s[table].pop(key)
        else:
            s[table][key] = value
    return s


@pytest.mark.parametrize("spec,param", [
    (_spec(kind="rho_starr"), "kind"),
    (_spec(kind=None), "kind"),
    (_spec(grid={}), "grid"),
    (_spec(grid=None), "grid"),
    (_spec(grid__width=[1, 2]), "grid.width"),
    (_spec(grid__depth=[]), "grid.depth"),
    (_spec(grid__depth=[0, 5]), "grid.depth"),
    (_spec(grid__depth=[2.5]), "grid.depth"),
    (_spec(grid__depth=[5, 5]), "grid.depth"),
    (_spec(grid__depth=5), "grid.depth"),
    (_spec(grid__sigma_w2=[1.0, -1.0]), "grid.sigma_w2"),
    (_spec(grid__sigma_w2=[1.0, "big"]), "grid.sigma_w2"),
    (_spec(grid__activation=["softmaxx"]), "grid.activation"),
    (_spec(fixed__sigma_b2=-0.1), "fixed.sigma_b2"),
    (_spec(fixed__input_kernel=float("nan")), "fixed.input_kernel"),
    (_spec(fixed__input_kernel_offdiag=0.2), "fixed.input_kernel_offdiag"),
    (_spec(fixed__depth=3), "fixed.depth"),
    (_spec(fixed__input_kernel=None), "input_kernel"),
    (_spec(run__chunk=0), "run.chunk"),
    (_spec(run__seed=-1), "run.seed"),
    (_spec(run__workers=2), "run.workers"),
    (_spec(extra={"a": 1}), "extra"),
    ({**LG, "grid": {"width": [1, 8]}}, "grid.width"),
    ({**LG, "grid": {"balanced": [0, 1]}}, "grid.balanced"),
    ({**LG, "fixed": {"alpha": 0.0, "lam": 0.0, "samples": 100}, "grid": {"width": [4], "depth": [2]}}, "fixed.alpha"),
    ({**LG, "fixed": {"alpha": 1.0, "lam": 0.5}}, "samples"),
    ({**RM, "grid": {"gamma": [0.5, 1.0]}}, "grid.gamma"),
    ({**RM, "fixed": {**RM["fixed"], "activation": "gelu"}}, "fixed.activation"),
    ({**RM, "fixed": {**RM["fixed"], "C_W": -1.0}}, "fixed.C_W"),
])
def test_bad_spec_names_the_key(spec, param, tmp_path):
    with pytest.raises(ParameterError) as err:
        run_sweep(spec, tmp_path / "x.nc", progress=False)
    assert err.value.parameter == param
    assert str(err.value).startswith(f"{param}:")
    assert not (tmp_path / "x.nc.parts").exists()


@pytest.mark.parametrize("out", ["x.csv", "x", "x.h5"])
def test_bad_output_extension(out, tmp_path):
    with pytest.raises(ParameterError, match=r"^out: .*\.nc, \.zarr") as err:
        run_sweep(RS, tmp_path / out, progress=False)
    assert err.value.parameter == "out"


def test_bad_toml_file(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("kind = rho_star\n")
    with pytest.raises(ParameterError, match=r"^spec: .*not valid TOML"):
        run_sweep(bad, tmp_path / "x.nc", progress=False)
    with pytest.raises(ParameterError, match=r"^spec: cannot read"):
        run_sweep(tmp_path / "missing.toml", tmp_path / "x.nc", progress=False)


# --------------------------------------------------------------------------- CLI entry and examples
def test_cli_sweep_from_toml(tmp_path, capsys):
    spec = tmp_path / "s.toml"
    spec.write_text(textwrap.dedent("""
        kind = "rho_star"
        [grid]
        depth = [3, 6]
        [fixed]
        input_kernel = 0.1
        sigma_w2 = 1.0
        sigma_b2 = 0.0
    """))
    assert cli_sweep(spec, tmp_path / "o.nc", workers=1, quiet=True) == 0
    out, err = capsys.readouterr()
    assert "wrote" in out and "rho_star" in out and err == ""
    ds = xr.open_dataset(tmp_path / "o.nc", engine="h5netcdf")
    assert ds.rho_star.dims == ("depth",) and ds.activation.item() == "erf"  # default filled in
    assert cli_sweep(spec, tmp_path / "o.nc", workers=1, quiet=False) == 0  # rerun replaces the file
    assert "sweep rho_star: 2 points" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["rho_star", "log_gaussian", "residual_mlp"])
def test_examples_are_valid(name):
    spec = normalize_spec(load_spec(ROOT / "examples" / "sweeps" / f"{name}.toml"))
    assert spec.kind == name and 10 <= spec.size <= 100
