"""All derivations resprop knows, by theory name (the order is the generation order)."""
from __future__ import annotations

from typing import Callable

from .abcd import derive_abcd
from .field_theory import derive_field_theory
from .gaussian import derive_gaussian
from .log_gaussian import derive_log_gaussian
from .predictive_coding import derive_predictive_coding
from .residual_mlp import derive_residual_mlp
from .stable_resnet import derive_stable_resnet
from .results import Derivation

THEORIES: dict[str, tuple[str, Callable[[], Derivation]]] = {
    "gaussian": ("derive/gaussian.py", derive_gaussian),
    "fischer": ("derive/field_theory.py", derive_field_theory),
    "log_gaussian": ("derive/log_gaussian.py", derive_log_gaussian),
    "pdlt_residual": ("derive/residual_mlp.py", derive_residual_mlp),
    "stable_resnet": ("derive/stable_resnet.py", derive_stable_resnet),
    "predictive_coding": ("derive/predictive_coding.py", derive_predictive_coding),
    "abcd": ("derive/abcd.py", derive_abcd),
}

#: Activations that get a generated Gauss--Hermite module.
GENERATED_ACTIVATIONS = ("erf", "tanh", "gelu")

PAPERS = {
    "fischer2025": "Fischer, Dahmen \\& Helias (2025), Phys. Rev. E 112, 065301",
    "li_nica_roy2021": "Li, Nica \\& Roy (2021), The future is log-Gaussian: ResNets and their infinite-depth-and-width limit at initialization, NeurIPS",
    "pdlt_appB": "Roberts, Yaida \\& Hanin (2022), The Principles of Deep Learning Theory, Appendix B",
    "hayou2021": "Hayou, Clerico, He, Deligiannidis, Doucet \\& Rousseau (2021), Stable ResNet, AISTATS",
    "cho_saul2009": "Cho \\& Saul (2009), Kernel methods for deep learning",
    "innocenti2025": "Innocenti, Achour \\& Bogacz (2025), On the infinite width and depth limits of predictive coding networks",
}


def derivation(theory: str) -> Derivation:
    try:
        return THEORIES[theory][1]()
    except KeyError:
        raise ValueError(f"theory: unknown theory {theory!r}; allowed: {', '.join(THEORIES)}") from None
