"""Package list for setuptools: the top-level folders derive/, numeric/, generated/ and templates/ are installed
under the ``resprop`` namespace (``package-dir`` in pyproject.toml).  Sub-packages are found, so a new theory
folder (numeric/theories/<slug>/) needs no edit here.  Everything else is in pyproject.toml."""
from setuptools import find_packages, setup

PACKAGES = ["resprop", "resprop.templates"] + [
    f"resprop.{name}" for top in ("derive", "numeric", "generated")
    for name in [top] + [f"{top}.{sub}" for sub in find_packages(top)]
]

setup(packages=PACKAGES)
