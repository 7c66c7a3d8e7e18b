"""Input sets for the data-set averages of Fischer et al. Sec. III C (Fig. 6)."""
from __future__ import annotations

import numpy as np

from resprop.numeric.engine import validation as V


def synthetic_angles(P: int, d_in: int = 100) -> np.ndarray:
    """P unit vectors in R^{d_in} at equally spaced angles 2 pi k / P in one plane (Fig. 6a)."""
    P = V.integer("P", P, 2)
    d_in = V.integer("d_in", d_in, 2)
    theta = 2 * np.pi * np.arange(P) / P
    X = np.zeros((P, d_in))
    X[:, 0], X[:, 1] = np.cos(theta), np.sin(theta)
    return X


def digits_0_vs_3(P: int = 20, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """P/2 images of digit 0 and P/2 of digit 3 from scikit-learn's bundled digits set (8x8, d_in = 64),
    centred and scaled to unit norm, sorted by class (the MNIST 0-vs-3 task of Fig. 6b, at scikit-learn's size)."""
    from sklearn.datasets import load_digits

    P = V.integer("P", P, 2)
    if P % 2:
        raise V.ParameterError("P", f"must be even (equal classes), got {P}")
    data = load_digits()
    rng = np.random.default_rng(seed)
    rows, labels = [], []
    for digit in (0, 3):
        idx = np.flatnonzero(data.target == digit)
        if P // 2 > idx.size:
            raise V.ParameterError("P", f"must be <= {2 * idx.size} for digit {digit}")
        pick = rng.choice(idx, P // 2, replace=False)
        rows.append(data.data[pick])
        labels += [digit] * (P // 2)
    X = np.vstack(rows).astype(float)
    X -= X.mean(axis=0)
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    return X, np.array(labels)


def scaled_kernel(X: np.ndarray, k0: float) -> np.ndarray:
    """Input kernel with the diagonal scaled to k0: K^(0) = k0 X X^T / max diag (unit rows give diag k0)."""
    k0 = float(V.positive("k0", k0))
    G = X @ X.T
    return k0 * G / np.max(np.diag(G))
