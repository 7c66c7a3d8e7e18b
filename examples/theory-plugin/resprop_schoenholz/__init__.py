"""Schoenholz, Gilmer, Ganguli & Sohl-Dickstein (2017), "Deep Information Propagation" (ICLR 2017), as a resprop
theory that lives outside resprop: a fully connected network of any activation, its length and correlation
maps, the fixed points q* and c*, chi_1, the depth scales xi_q and xi_c, the order-to-chaos line and the
divergence of xi_c at it.

The distribution declares the entry point ``schoenholz = "resprop_schoenholz"`` in the ``resprop.theories`` group
(pyproject.toml), so ``pip install`` is all it takes: every ``resprop`` command then lists it, runs its claims and
exports its LaTeX.  Its parts:

``derivation.py``  the SymPy derivation: the maps written with Gaussian expectations of the activation
                   (resprop.derive.expectation), their slopes by Price's theorem (checked against Stein's lemma),
                   depth scales, critical line; kernels per activation (erf, tanh, relu, gelu) and generic ones;
``generated/``     what ``resprop derive schoenholz`` wrote from it (kernels, parameters, LaTeX, reference pages);
``driver.py``      fixed points by root finding on the generated kernels (any other activation: the generic
                   kernels on resprop's expectation engine);
``network.py``     random finite-width networks with explicit weights (the Monte Carlo evidence);
``mp_checks.py``   mpmath quadrature at 30 digits (the independent reference values);
``claims.py``      the report's claims; ``figures.py`` its figure; ``cli.py`` its subcommands.
"""
from resprop.registry import Theory

THEORY = Theory(
    slug="schoenholz",
    title="Schoenholz et al.: deep information propagation (mean-field depth scales)",
    citation="Schoenholz, Gilmer, Ganguli & Sohl-Dickstein (2017), Deep Information Propagation, ICLR 2017",
    paper="schoenholz2017",
    citation_tex="Schoenholz, Gilmer, Ganguli \\& Sohl-Dickstein (2017), Deep Information Propagation, ICLR 2017",
    summary="Length and correlation maps of a deep fully connected network of any activation: q*, c*, chi_1, the "
            "depth scales xi_q and xi_c, the order-to-chaos line and the divergence of xi_c at it.",
    derivations={"schoenholz": "resprop_schoenholz.derivation:derive_schoenholz"},
    cli="resprop_schoenholz.cli:add_subcommands",
    subcommands=("schoenholz-depth-scales", "schoenholz-critical"),
    claims="resprop_schoenholz.claims:claims",
    figures="resprop_schoenholz.figures:make_figures",
    # resprop's shared generated files its numbers depend on (the report's freshness row): the engine's quadrature,
    # which the generated tanh kernels call (the claims are tanh's)
    generated_shared=("gauss_hermite.py",),
    steps=7,  # one per claim
)
