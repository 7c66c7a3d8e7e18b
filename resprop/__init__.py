"""resprop: derive, generate and verify the theory of signal propagation in residual networks.

The import packages are ``resprop.derive`` (SymPy derivations), ``resprop.generated`` (NumPy kernels written by
``resprop derive``), ``resprop.numeric`` (numeric drivers, Monte Carlo, report, CLI) and ``resprop.templates``
(the Jinja2 templates).  In the source tree they are the top-level folders ``derive/``, ``generated/``,
``numeric/`` and ``templates/`` (mapped with setuptools ``package-dir``).
"""
from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("resprop")
except PackageNotFoundError:  # pragma: no cover - running from a source tree without an install
    __version__ = "0+unknown"

__all__ = ["kernel", "fluctuations", "predict", "__version__"]


def __getattr__(name: str):
    """``resprop.kernel``, ``resprop.fluctuations`` and ``resprop.predict`` (imported on first use, so that
    ``import resprop`` stays light)."""
    if name == "kernel":
        from resprop.numeric.engine.kernel import kernel

        return kernel
    if name == "fluctuations":
        from resprop.numeric.engine.fluctuations import fluctuations

        return fluctuations
    if name == "predict":
        from resprop.numeric.engine.predict import predict

        return predict
    raise AttributeError(f"module 'resprop' has no attribute {name!r}")
