"""A plain NumPy MLP (dense layers, relu/sigmoid/tanh, softmax cross-entropy)
in the run's dtype: the arithmetic of numpy_serial.py and
mpi4py_fullbatch.py, written once.

Not parity's arithmetic: numpy's own sums and BLAS, which parity's lockstep
holds to its order-free bound. Tested through the examples
(python/tests/test_examples.py).
"""
import numpy as np

from parity_ext.faults import round_mantissa

ACT = {"relu": lambda z: np.maximum(z, 0), "sigmoid": lambda z: 1 / (1 + np.exp(-z)),
       "tanh": np.tanh, "none": lambda z: z}
# The activation's derivative from its output y, as parity's backward pass takes it.
DACT = {"relu": lambda y: (y > 0).astype(y.dtype), "sigmoid": lambda y: y * (1 - y),
        "tanh": lambda y: 1 - y * y, "none": np.ones_like}


def check_model(hello, who):
    """Raises ValueError unless the run is an mlp with SGD (what this code trains)."""
    if not hello.spec.startswith("mlp:"):
        raise ValueError(f"{who} trains mlp: models only, parity asked for {hello.spec}")
    if hello.optim["name"] != "sgd":
        raise ValueError(f"{who} trains with SGD only, parity asked for {hello.optim['name']}")


def params(state, model):
    """[(W, b)] of each layer from a state {name: array}."""
    return [(state[f"layer{L.index}.weight"], state[f"layer{L.index}.bias"])
            for L in model.layers]


def forward(ps, x, model, tf32=False):
    """Outputs of every layer after its activation [a0 = x, a1, ..., aL = logits]."""
    outs = [x]
    for (W, b), L in zip(ps, model.layers):
        z = outs[-1] @ W.T + b
        if tf32 and L.index == 0:
            z = round_mantissa(z)   # --bug tf32: this layer's output keeps 10 mantissa bits
        outs.append(ACT[L.act](z))
    return outs


def softmax_xent(logits, labels):
    """Each sample's cross-entropy (B,) and the softmax probabilities (B, K)."""
    z = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(z)
    s = e.sum(axis=1, keepdims=True)
    losses = np.log(s[:, 0]) - z[np.arange(len(labels)), labels]
    return losses, e / s


def backward(ps, outs, dlogits, model):
    """Gradients [(dW, db)] of each layer and each layer's dz (the gradient
    with respect to its output before the activation), from dlogits, the
    gradient of the loss with respect to the logits."""
    dz, grads, dzs = dlogits, [None] * len(ps), [None] * len(ps)
    for l in range(len(ps) - 1, -1, -1):
        dzs[l] = dz
        grads[l] = (dz.T @ outs[l], dz.sum(axis=0))
        if l > 0:
            dz = (dz @ ps[l][0]) * DACT[model.layers[l - 1].act](outs[l])
    return grads, dzs


def rows(outs, dzs, losses):
    """The step's per-sample intermediates under parity's names: each layer's
    output and dz, each sample's loss (one row per sample)."""
    out = {"loss.samples": losses}
    for l, dz in enumerate(dzs):
        out[f"layer{l}.out"] = outs[l + 1]
        out[f"layer{l}.dz"] = dz
    return out


def grad_arrays(grads):
    """The gradients [(dW, db)] under parity's names grad.layer<l>.weight/bias."""
    return {f"grad.layer{l}.{n}": g for l, pair in enumerate(grads)
            for n, g in zip(("weight", "bias"), pair)}


def dlogits(p, labels, denom):
    """The gradient of sum(losses) / denom with respect to the logits."""
    d = p.copy()
    d[np.arange(len(labels)), labels] -= 1
    return d / p.dtype.type(denom)
