"""Bad input gives a clear error naming the parameter; the CLI exits 2 with the message; --json outputs."""
import json
import subprocess
import sys

import numpy as np
import pytest

from resprop.numeric.cli import main
from resprop.numeric.theories.fischer import field_theory as F

GOOD = dict(input_kernel=0.05, sigma_w2=1.25, sigma_b2=0.05)


@pytest.mark.parametrize("kwargs,param", [
    (dict(GOOD, sigma_w2=0.0), "sigma_w2"),
    (dict(GOOD, sigma_w2=-1.0), "sigma_w2"),
    (dict(GOOD, sigma_b2=-0.1), "sigma_b2"),
    (dict(GOOD, input_kernel=-0.05), "input_kernel"),
    (dict(GOOD, input_kernel=0.0), "input_kernel"),
    (dict(GOOD, sigma_w2=float("nan")), "sigma_w2"),
    (dict(GOOD, input_kernel=float("nan")), "input_kernel"),
    (dict(GOOD, input_kernel_offdiag=0.2), "input_kernel_offdiag"),
    (dict(GOOD, activation="softmaxx"), "activation"),
    (dict(GOOD, sigma_w2_out=0.0), "sigma_w2_out"),
])
def test_rho_star_bad_input(kwargs, param):
    with pytest.raises(ValueError, match=rf"^{param}:"):
        F.rho_star([10], **kwargs)


@pytest.mark.parametrize("depth", [0, -3, 2.5])
def test_bad_depth(depth):
    with pytest.raises(ValueError, match=r"^depth:"):
        F.rho_star([depth], **GOOD)
    with pytest.raises(ValueError, match=r"^depth:"):
        F.response(0.05, depth, 0.3, 1.25, 0.05)


def test_negative_rho():
    with pytest.raises(ValueError, match=r"^rho: must be >= 0"):
        F.response(0.05, 10, -0.1, 1.25, 0.05)


@pytest.mark.parametrize("K0,msg", [
    (np.array([[0.1, 0.05], [0.0, 0.1]]), "symmetric"),
    (np.array([[0.1, 0.3], [0.3, 0.1]]), "positive semi-definite"),
    (np.array([[0.1, np.nan], [np.nan, 0.1]]), "NaN"),
    (np.array([0.1, 0.2]), "square"),
    (np.array([[-0.1, 0.0], [0.0, 0.1]]), "positive semi-definite"),
])
def test_bad_input_kernel(K0, msg):
    with pytest.raises(ValueError, match=rf"^input_kernel: .*{msg}"):
        F.nngp(K0, 10, 0.3, 1.25, 0.05)


def run(argv, capsys):
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse refused an option (a declared parameter's check): exit 2
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_rho_star_json(capsys):
    code, out, _ = run(["rho-star", "--depth", "10", "50", "100", "--input-kernel", "0.05",
                        "--input-kernel-offdiag", "0.03", "--sigma-w2", "1.25", "--sigma-b2", "0.05", "--sigma-w2-out", "1.25", "--activation", "erf",
                        "--json"], capsys)
    assert code == 0
    data = json.loads(out)
    assert set(data) == {"depth", "search_range", "rho_star", "rho_star_boundary", "rho_star_offdiag",
                         "rho_star_offdiag_boundary"}
    assert data["rho_star_boundary"] == data["rho_star_offdiag_boundary"] == [None] * 3  # interior maxima
    assert data["depth"] == [10, 50, 100]
    assert np.allclose(data["rho_star"], F.rho_star([10, 50, 100], **GOOD)["rho_star"])
    code, out, _ = run(["rho-star", "--depth", "10", "--input-kernel", "0.05", "--sigma-w2", "1.25", "--sigma-b2", "0.05",
                        "--json"], capsys)
    assert set(json.loads(out)) == {"depth", "search_range", "rho_star", "rho_star_boundary"}


def test_cli_response_json(capsys):
    code, out, _ = run(["response", "--rho", "0.3", "--depth", "50", "--input-kernel", "0.05", "--sigma-w2", "1.25",
                        "--sigma-b2", "0.05", "--json"], capsys)
    data = json.loads(out)
    assert code == 0 and len(data["eta"]) == 51 and len(data["chi"]) == 51
    assert data["chi_out"] == pytest.approx(F.response(0.05, 50, 0.3, 1.25, 0.05)["chi_out"], rel=1e-14)


@pytest.mark.parametrize("argv,param", [
    (["response", "--rho", "-0.3", "--depth", "5", "--input-kernel", "0.05", "--sigma-w2", "1.25", "--sigma-b2", "0.05"], "rho"),
    (["response", "--rho", "0.3", "--depth", "0", "--input-kernel", "0.05", "--sigma-w2", "1.25", "--sigma-b2", "0.05"], "depth"),
    (["rho-star", "--depth", "10", "--input-kernel", "0.05", "--sigma-w2", "-1", "--sigma-b2", "0.05"], "sigma_w2"),
    (["rho-star", "--depth", "10", "--input-kernel", "nan", "--sigma-w2", "1", "--sigma-b2", "0.05"], "input_kernel"),
    (["rho-star", "--depth", "10", "--input-kernel", "0.05", "--sigma-w2", "1", "--sigma-b2", "0.05", "--activation", "foo"],
     "activation"),
])
def test_cli_bad_input_exits_2(argv, param, capsys):
    code, _, err = run(argv, capsys)
    assert code == 2
    # a driver's ParameterError and a declared option's check share one form: "error: sigma_w2: ..."
    assert f"error: {param}:" in err, err


def test_console_script_derive_check():
    proc = subprocess.run([sys.executable, "-m", "resprop.numeric.cli", "derive", "--check"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_sweep_without_the_extra_names_it(monkeypatch, capsys, tmp_path):
    """Without resprop[sweep] installed, `resprop sweep` exits 2 and says which extra to install."""
    import importlib.util

    from resprop.numeric.cli import main

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "xarray" else real(name, *a))
    spec = tmp_path / "s.toml"
    spec.write_text('kind = "rho_star"\n[grid]\ndepth = [3]\n[fixed]\ninput_kernel = 0.05\nsigma_w2 = 1.0\nsigma_b2 = 0.0\n')
    assert main(["sweep", str(spec), "--out", str(tmp_path / "o.nc"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "resprop[sweep]" in err and "xarray" in err
    assert not (tmp_path / "o.nc").exists()
