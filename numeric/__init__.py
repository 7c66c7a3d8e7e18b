"""Numeric drivers of the generated kernels: NNGP, response, rho*, simulation, mpmath checks."""
