"""The subcommands through `resprop` (in-process, as the console script runs them)."""
import json

import pytest

from resprop.numeric.cli import main


def test_depth_scales_and_critical(capsys):
    assert main(["schoenholz-depth-scales", "--sigma-w2", "2.5", "--sigma-b2", "0.05", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["phase"] == "chaotic" and 0 < out["c_star"] < 1 and out["xi_c"] > 1
    assert main(["schoenholz-depth-scales", "--activation", "x*exp(-x**2/2)", "--sigma-w2", "3",
                 "--sigma-b2", "0.1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["activation"] == "x*exp(-x**2/2)"
    assert main(["schoenholz-critical", "--sigma-b2", "0.05", "--json"]) == 0
    assert abs(json.loads(capsys.readouterr().out)["sigma_w2"] - 1.761) < 5e-4


@pytest.mark.parametrize("argv, name", [
    (["schoenholz-depth-scales", "--sigma-w2", "-1", "--sigma-b2", "0.05"], "sigma_w2"),
    (["schoenholz-depth-scales", "--sigma-w2", "nan", "--sigma-b2", "0.05"], "sigma_w2"),
    (["schoenholz-depth-scales", "--sigma-w2", "1", "--sigma-b2", "inf"], "sigma_b2"),
    (["schoenholz-depth-scales", "--sigma-w2", "1", "--sigma-b2", "0.1", "--activation", "sign(x)"], "activation"),
    (["schoenholz-depth-scales", "--sigma-w2", "1", "--sigma-b2", "0.1", "--activation", ""], "activation"),
    (["schoenholz-depth-scales", "--sigma-w2", "3", "--sigma-b2", "0.1", "--activation", "relu"], "sigma_w2"),
    (["schoenholz-critical", "--sigma-b2", "abc"], "sigma_b2"),
])
def test_bad_input_exits_2_naming_the_parameter(argv, name, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("resprop: error:") and name in err[0], err
