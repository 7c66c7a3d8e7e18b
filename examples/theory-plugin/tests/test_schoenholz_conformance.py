"""resprop's conformance suite (resprop.testing.check_theory) on the installed plugin: the derivation regenerates
to the committed generated/ (resprop derive --check schoenholz), the LaTeX parses back to the SymPy results, the
kernels validate their declared domains (hypothesis) and equal the SymPy results in mpmath, the claims compute
with independent evidence, the figure renders and the subcommands refuse bad input with exit 2."""
from resprop.testing import check_theory
from resprop_schoenholz import THEORY

EXAMPLES = {"schoenholz-depth-scales": ["--sigma-w2", "2.5", "--sigma-b2", "0.05"],
            "schoenholz-critical": ["--sigma-b2", "0.05"]}


def test_the_plugin_conforms():
    summary = check_theory(THEORY, quick=True, cli_examples=EXAMPLES)
    # 11 generic kernels + 8 per activation for erf, tanh, relu, gelu, less ReLU's two constant ones (no inputs)
    assert summary["kernels"]["kernels"] == 11 + 8 * 4 - 2 and summary["claims"]["with_monte_carlo"] == 2
    assert summary["figures"]["figures"] == 1 and summary["cli"]["subcommands"] == 2
