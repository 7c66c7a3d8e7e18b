"""Innocenti, Achour & Bogacz: abcd parameterisations of predictive coding and backprop (Innocenti, Achour & Bogacz
(2025), On the infinite width and depth limits of predictive coding networks).

The theory's registry entry: see resprop.registry and docs/adding-a-theory.md."""
from resprop.registry import Theory

THEORY = Theory(
    slug="abcd",
    title="Innocenti, Achour & Bogacz: abcd parameterisations of predictive coding and backprop",
    citation="Innocenti, Achour & Bogacz (2025), On the infinite width and depth limits of predictive coding networks",
    paper="innocenti2025",
    citation_tex="Innocenti, Achour \\& Bogacz (2025), On the infinite width and depth limits of predictive "
                 "coding networks",
    summary="abcd parameterisations of linear backprop and predictive-coding networks; equilibrated PC energy "
            "and its backprop limit.",
    derivations={
        "abcd": "resprop.derive.theories.abcd:derive_abcd",
        "predictive_coding": "resprop.derive.theories.predictive_coding:derive_predictive_coding",
    },
    cli="resprop.numeric.theories.abcd.cli:add_subcommands",
    subcommands=("abcd",),
    claims="resprop.numeric.theories.abcd.claims:claims",
    figures="resprop.numeric.theories.abcd.figures:make_figures",
    steps=6,
    docs="docs/quickstart/abcd.md",
    experiments="resprop.numeric.theories.abcd.training:EXPERIMENTS",
)
