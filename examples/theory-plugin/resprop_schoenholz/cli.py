"""The theory's `resprop` subcommands (declared in its registry entry):

``resprop schoenholz-depth-scales [--activation EXPR] --sigma-w2 S --sigma-b2 B [--json]``
    q*, chi_q, xi_q, chi_1, the phase, c*, chi_c and xi_c of a deep fully connected network;
``resprop schoenholz-critical [--activation EXPR] --sigma-b2 B [--json]``
    sigma_w^2 on the order-to-chaos line at sigma_b^2 (and q* there).

The options are the derivation's declared parameters (`resprop.numeric.cli_support.add_parameter_option`): a value
outside its domain, NaN, inf or text exits 2 with one line naming the option; a bad activation exits 2 naming
``activation`` (resprop's ParameterError).
"""
from __future__ import annotations

from resprop.numeric.cli_support import add_parameter_option, emit


def _declared(name: str):
    """The declaration of ``name``: the generated parameters module, or (before the first `resprop derive
    schoenholz` has written it) the derivation's own declaration."""
    try:
        from resprop_schoenholz.generated.parameters import PARAMETERS
    except ImportError:
        from resprop_schoenholz.derivation import PARAMETERS as DECLARED

        return next(p for p in DECLARED if p.name == name)
    return PARAMETERS["schoenholz"][name]


def cmd_depth_scales(args) -> int:
    from resprop_schoenholz.driver import depth_scales

    emit(depth_scales(args.activation, args.sigma_w2, args.sigma_b2).to_dict(), args.json)
    return 0


def cmd_critical(args) -> int:
    from resprop_schoenholz.driver import critical_point

    emit(critical_point(args.activation, args.sigma_b2).to_dict(), args.json)
    return 0


def _activation(p) -> None:
    p.add_argument("--activation", default="tanh", metavar="EXPR",
                   help="a name (tanh, erf, relu, gelu, linear) or a SymPy expression in x, e.g. 'x*exp(-x**2/2)'; "
                        "default: tanh")


def add_subcommands(sub) -> None:
    """Add this theory's subcommands to the ``resprop`` parser's sub-parsers."""
    p = sub.add_parser("schoenholz-depth-scales",
                       help="Schoenholz et al. (2017): fixed points q*, c*, chi_1 and the depth scales xi_q, xi_c")
    _activation(p)
    add_parameter_option(p, _declared("sigma_w2"), required=True, metavar="S")
    add_parameter_option(p, _declared("sigma_b2"), required=True, metavar="B")
    p.add_argument("--json", action="store_true", help="print the result as JSON (default: readable lines)")
    p.set_defaults(func=cmd_depth_scales)
    p = sub.add_parser("schoenholz-critical",
                       help="Schoenholz et al. (2017): sigma_w^2 on the order-to-chaos line at sigma_b^2")
    _activation(p)
    add_parameter_option(p, _declared("sigma_b2"), required=True, metavar="B")
    p.add_argument("--json", action="store_true", help="print the result as JSON (default: readable lines)")
    p.set_defaults(func=cmd_critical)
