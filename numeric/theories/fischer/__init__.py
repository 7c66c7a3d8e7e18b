"""Fischer, Dahmen & Helias: field theory of residual networks (Fischer, Dahmen & Helias (2025), Phys. Rev. E 112,
065301).

The theory's registry entry: see resprop.registry and docs/adding-a-theory.md."""
from resprop.registry import Theory

THEORY = Theory(
    slug="fischer",
    title="Fischer, Dahmen & Helias: field theory of residual networks",
    citation="Fischer, Dahmen & Helias (2025), Phys. Rev. E 112, 065301",
    paper="fischer2025",
    citation_tex="Fischer, Dahmen \\& Helias (2025), Phys. Rev. E 112, 065301",
    summary="Kernel recursion, response function, optimal residual scaling rho* and O(1/n) kernel fluctuations "
            "of residual networks.",
    derivations={"fischer": "resprop.derive.theories.fischer:derive_field_theory"},
    cli="resprop.numeric.theories.fischer.cli:add_subcommands",
    subcommands=("rho-star", "response"),
    claims="resprop.numeric.theories.fischer.claims:claims",
    figures="resprop.numeric.theories.fischer.figures:make_figures",
    generated_shared=(
        "gaussian.py",
        "latex/gaussian.tex",
        "gauss_hermite.py",
        "activation_erf.py",
        "activation_tanh.py",
        "activation_gelu.py",
    ),
    sweep_kinds="resprop.numeric.theories.fischer.sweep:KINDS",
    experiments="resprop.numeric.theories.fischer.training:EXPERIMENTS",
    steps=5,
    docs="docs/quickstart/fischer.md",
)
