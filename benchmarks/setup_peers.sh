#!/usr/bin/env bash
# Create benchmarks/.venv-peers: the separate virtual environment for the peer benchmarks
# (bench_peers_nt.py, bench_peers_torch.py).  neural-tangents 0.6.5 needs an old JAX
# (jax/jaxlib 0.4.30) and tf2jax 0.3.6 with TensorFlow (CPU), which cannot live in the main
# environment; PyTorch (CPU) goes here too so the main environment stays as it is.
#
#     bash benchmarks/setup_peers.sh            # create (or update) the venv
#     PYTHON=python3.11 bash benchmarks/setup_peers.sh
#
# TensorFlow is pinned to 2.17.1, the last release that requires NumPy < 2 and ml_dtypes < 0.5,
# which is what jaxlib 0.4.30 was built against (newer TensorFlow pulls NumPy 2 / ml_dtypes 0.5).
# It is the plain `tensorflow` package because tf2jax depends on that name; without the
# [and-cuda] extra it is the CPU build.  PEERS_VENV=DIR puts the venv elsewhere.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="${PEERS_VENV:-$HERE/.venv-peers}"
PY="${PYTHON:-python3}"

if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install \
    "neural-tangents==0.6.5" "jax==0.4.30" "jaxlib==0.4.30" "tf2jax==0.3.6" "tensorflow==2.17.1" \
    "torch==2.13.0"
"$VENV/bin/python" - <<'EOF'
import jax, jaxlib, neural_tangents, numpy, tensorflow, tf2jax, torch
print("peers venv ready: neural-tangents", neural_tangents.__version__, "| jax", jax.__version__,
      "| jaxlib", jaxlib.__version__, "| tf2jax", tf2jax.__version__, "| tensorflow", tensorflow.__version__,
      "| torch", torch.__version__, "| numpy", numpy.__version__)
EOF
