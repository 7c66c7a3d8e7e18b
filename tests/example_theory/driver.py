"""Numeric driver of the example theory: the generated kernels (example_theory.generated.linear) and a simulation."""
import importlib

import numpy as np

from resprop.numeric.engine import validation as V


def generated():
    """The kernels `resprop derive linear` wrote into this theory's own package (generated/linear.py)."""
    return importlib.import_module("example_theory.generated.linear")


def mean_kernel(input_kernel, depth, rho, sigma_w2, sigma_b2=0.0) -> float:
    """E[K^(depth)] from the closed form (eq. 2 of the example)."""
    depth = V.integer("depth", depth, 0)
    input_kernel = V.nonnegative("input_kernel", input_kernel)  # the kernel calls it K_0: name it as the caller does
    return float(generated().kernel_at_depth(input_kernel, rho, sigma_w2, sigma_b2, depth))


def simulate_kernel(input_kernel, depth, width, rho, sigma_w2, sigma_b2=0.0, *, samples=200, seed=0):
    """Monte Carlo mean and standard error of K^(depth) = |h|^2 / width over ``samples`` networks."""
    depth, width = V.integer("depth", depth, 0), V.integer("width", width, 1)
    samples = V.integer("samples", samples, 2)
    rng = np.random.default_rng(seed)
    h = np.full((samples, width), np.sqrt(input_kernel))
    for _ in range(depth):
        W = rng.standard_normal((samples, width, width))
        b = rng.standard_normal((samples, width))
        h = h + rho * (np.sqrt(sigma_w2) * np.einsum("sij,sj->si", W, h) / np.sqrt(width) + np.sqrt(sigma_b2) * b)
    k = np.einsum("si,si->s", h, h) / width
    return float(k.mean()), float(k.std(ddof=1) / np.sqrt(samples))
