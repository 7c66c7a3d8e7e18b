"""Li, Nica & Roy: log-Gaussian ResNets (vanilla and balanced) (Li, Nica & Roy (2021), The future is log-Gaussian:
ResNets and their infinite-depth-and-width limit at initialization, NeurIPS).

The theory's registry entry: see resprop.registry and docs/adding-a-theory.md."""
from resprop.registry import Theory

THEORY = Theory(
    slug="lognormal",
    title="Li, Nica & Roy: log-Gaussian ResNets (vanilla and balanced)",
    citation="Li, Nica & Roy (2021), The future is log-Gaussian: ResNets and their infinite-depth-and-width "
             "limit at initialization, NeurIPS",
    paper="li_nica_roy2021",
    citation_tex="Li, Nica \\& Roy (2021), The future is log-Gaussian: ResNets and their "
                 "infinite-depth-and-width limit at initialization, NeurIPS",
    summary="Log-Gaussian output norm of ResNets at finite depth-to-width ratio: E[G], Var[G], hypoactivation, "
            "balanced ResNets.",
    derivations={"lognormal": "resprop.derive.theories.lognormal:derive_log_gaussian"},
    cli="resprop.numeric.theories.lognormal.cli:add_subcommands",
    subcommands=("log-gaussian", "j2bar"),
    claims="resprop.numeric.theories.lognormal.claims:claims",
    cross_claims="resprop.numeric.theories.lognormal.claims:cross_claims",
    cross_with=("pdlt",),
    figures="resprop.numeric.theories.lognormal.figures:make_figures",
    sweep_kinds="resprop.numeric.theories.lognormal.sweep:KINDS",
    experiments="resprop.numeric.theories.lognormal.training:EXPERIMENTS",
    steps=8,
    docs="docs/quickstart/lognormal.md",
)
