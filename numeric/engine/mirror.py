"""The lower triangle of a symmetric kernel from its upper-triangle tiles, with a finiteness check on the way.

The kernel engine computes the upper triangle tile by tile (`residual_kernel.band_tiles` / `tile_grid`) and
copies each tile's transpose below the diagonal.  `mirror_tile` does that for one tile in compiled code, column
blocks of the tile at a time (the reads of a block stay in cache), and returns whether every value it copied (the
tile's elements strictly above the diagonal) is finite, so the caller needs no separate pass over P x P values to
check for overflow.  Tiles write disjoint parts of the lower triangle that no tile reads, so the engine's threads
mirror their own tiles as soon as they are done.  Without Numba, NumPy does the same copy and check.
"""
from __future__ import annotations

from types import ModuleType

import numpy as np

numba: ModuleType | None
try:
    import numba
except ImportError:  # pragma: no cover - exercised only where numba is not installed
    numba = None

#: columns of a tile copied per block (the block's source rows stay in L1/L2); results do not depend on it
BLOCK = 64


def _mirror_tile_py(M, r0, r1, c0, c1, block):
    finite = True
    for j0 in range(max(c0, r0 + 1), c1, block):
        j1 = min(c1, j0 + block)
        for j in range(j0, j1):
            top = min(r1, j)
            for i in range(r0, top):
                v = M[i, j]
                M[j, i] = v
                if not (v - v == 0.0):
                    finite = False
    return finite


#: the compiled copy (compiled on its first call; compiled kernels such as `depth_collapse` call it too)
mirror_columns = (numba.njit(nogil=True, cache=True, boundscheck=False)(_mirror_tile_py) if numba is not None
                  else None)


def _kernel():
    assert mirror_columns is not None
    return mirror_columns


def mirror_tile(M: np.ndarray, r0: int, r1: int, c0: int, c1: int, block: int | None = None) -> bool:
    """M[j, i] = M[i, j] for the elements (i, j) of the tile rows r0:r1, columns c0:c1 with i < j (a diagonal
    tile's own lower part is overwritten too); True when all of them are finite.  ``block``: columns per block
    (default BLOCK; the result does not depend on it)."""
    block = max(1, int(BLOCK if block is None else block))
    if numba is None:  # pragma: no cover
        ok = True
        for j in range(max(c0, r0 + 1), c1):
            top = min(r1, j)
            col = M[r0:top, j]
            M[j, r0:top] = col
            ok = ok and bool(np.isfinite(col).all())
        return ok
    return bool(_kernel()(M, int(r0), int(r1), int(c0), int(c1), block))



