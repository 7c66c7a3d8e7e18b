"""A worked example theory (docs/adding-a-theory.md): the kernel of a deep *linear* residual network.

Network: h^(l+1) = h^(l) + rho (sigma_w W^(l) h^(l) / sqrt(width) + sigma_b b^(l)), W and b standard normal, so the
mean kernel K^(l) = E[h^(l) . h^(l)] / width obeys K^(l+1) = (1 + rho^2 sigma_w^2) K^(l) + rho^2 sigma_b^2 exactly,
at every width.  This package is the whole theory: its registry entry (below), its derivation
(``derivation.py``), its claims (``claims.py``) and its CLI subcommand (``cli.py``).  Its registry entry is added at
run time with ``resprop.registry.register(THEORY)``; a theory shipped with resprop adds its package to
``resprop.registry.BUILTIN`` instead.
"""
from resprop.registry import Theory

THEORY = Theory(
    slug="linear",
    title="Deep linear residual network: exact mean kernel",
    citation="resprop worked example (docs/adding-a-theory.md)",
    paper="example_linear",
    citation_tex="resprop worked example (docs/adding-a-theory.md)",
    summary="Mean kernel of a deep linear ResNet: a one-line recursion, its closed form and a Monte Carlo check.",
    derivations={"linear": "example_theory.derivation:derive_linear"},
    cli="example_theory.cli:add_subcommands",
    subcommands=("linear-kernel",),
    claims="example_theory.claims:claims",
    steps=1,
    package="example_theory",  # its generated code goes to example_theory/generated/ (`resprop derive linear`)
)
