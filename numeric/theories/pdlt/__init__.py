"""Roberts, Yaida & Hanin: residual MLPs (The Principles of Deep Learning Theory, App. B) (Roberts, Yaida & Hanin
(2022), The Principles of Deep Learning Theory, Appendix B).

The theory's registry entry: see resprop.registry and docs/adding-a-theory.md."""
from resprop.registry import Theory

THEORY = Theory(
    slug="pdlt",
    title="Roberts, Yaida & Hanin: residual MLPs (The Principles of Deep Learning Theory, App. B)",
    citation="Roberts, Yaida & Hanin (2022), The Principles of Deep Learning Theory, Appendix B",
    paper="pdlt_appB",
    citation_tex="Roberts, Yaida \\& Hanin (2022), The Principles of Deep Learning Theory, Appendix B",
    summary="Residual MLPs at criticality: kernel and four-point vertex recursions, nu(gamma), optimal aspect "
            "ratio r*.",
    derivations={"pdlt": "resprop.derive.theories.pdlt:derive_residual_mlp",
                 "pdlt_vertex": "resprop.derive.theories.pdlt_vertex:derive_multi_input_vertex",
                 "pdlt_corrected": "resprop.derive.theories.pdlt_corrected:derive_pdlt_corrected"},
    cli="resprop.numeric.theories.pdlt.cli:add_subcommands",
    subcommands=("nu", "residual-mlp"),
    claims="resprop.numeric.theories.pdlt.claims:claims",
    figures="resprop.numeric.theories.pdlt.figures:make_figures",
    generated_shared=("gauss_hermite.py",),
    sweep_kinds="resprop.numeric.theories.pdlt.sweep:KINDS",
    steps=7,
    docs="docs/quickstart/pdlt.md",
)
