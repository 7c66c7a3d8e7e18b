"""Hayou et al.: Stable ResNet (Hayou, Clerico, He, Deligiannidis, Doucet & Rousseau (2021), Stable ResNet, AISTATS).

The theory's registry entry: see resprop.registry and docs/adding-a-theory.md."""
from resprop.registry import Theory

THEORY = Theory(
    slug="stable",
    title="Hayou et al.: Stable ResNet",
    citation="Hayou, Clerico, He, Deligiannidis, Doucet & Rousseau (2021), Stable ResNet, AISTATS",
    paper="hayou2021",
    citation_tex="Hayou, Clerico, He, Deligiannidis, Doucet \\& Rousseau (2021), Stable ResNet, AISTATS",
    summary="Scaled residual blocks keep the ReLU NNGP/NTK expressive at infinite depth; GP regression and "
            "PAC-Bayes experiments.",
    derivations={"stable": "resprop.derive.theories.stable:derive_stable_resnet"},
    cli="resprop.numeric.theories.stable.cli:add_subcommands",
    subcommands=("stable-kernel",),
    claims="resprop.numeric.theories.stable.claims:claims",
    cross_claims="resprop.numeric.theories.stable.claims:cross_claims",
    cross_with=("fischer",),
    figures="resprop.numeric.theories.stable.figures:make_figures",
    generated_shared=("gaussian.py",),
    figures_before_claims=True,
    steps=7,
    docs="docs/quickstart/stable.md",
    experiments="resprop.numeric.theories.stable.training:EXPERIMENTS",
)
