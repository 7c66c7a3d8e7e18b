"""Symbolic derivations (SymPy): one module per theory plus the shared Gaussian toolbox."""
