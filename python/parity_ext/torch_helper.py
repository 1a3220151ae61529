"""PyTorch for parity's models: model_from_spec builds the torch.nn module of a
parity spec whose state_dict names are parity's view names (`layer0.weight`,
...), moves parity's state (weights, batchnorm statistics, optimizer state)
into a module and a torch optimizer and back, and captures a step's
intermediates (each layer's output and output gradient) across DDP ranks.

Only this module imports torch. Not a trainer (python/examples/torch_ddp.py
is one). Tested against parity's reference in f64
(python/tests/test_torch_helper.py, tests/tools/torch_crosscheck.py).
"""
import numpy as np
import torch
import torch.distributed as dist

from . import npz, spec as spec_mod

TORCH_DTYPES = {"f32": torch.float32, "f64": torch.float64}
ACT_FUNCS = {"relu": torch.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh}
NUMPY_DTYPES = {torch.float32: np.float32, torch.float64: np.float64}
COUNT = "num_batches_tracked"   # torch: an int64 scalar; parity: (1,) in the dtype


def torch_dtype(dtype):
    """torch dtype of 'f32'/'f64' (a torch dtype passes through)."""
    return TORCH_DTYPES[dtype] if isinstance(dtype, str) else dtype


def flat_batchnorm(L):
    """A batchnorm over features (after an fc, or 1x1 images): BatchNorm1d."""
    return L.h_in == 1 and L.w_in == 1


def in_shape(L):
    """The per-sample shape layer L's torch module takes."""
    if L.kind == "dense" or (L.kind == "batchnorm" and flat_batchnorm(L)):
        return (L.n_in,)
    return (L.c_in, L.h_in, L.w_in)


def layer_module(L):
    """The torch module of one parity layer (its activation is applied apart)."""
    if L.kind == "dense":
        return torch.nn.Linear(L.n_in, L.c_out)
    if L.kind == "conv2d":
        return torch.nn.Conv2d(L.c_in, L.c_out, L.K, stride=L.stride, padding=L.pad)
    if L.kind == "maxpool":
        return torch.nn.MaxPool2d(L.K)   # stride K, floor: parity drops the rest too
    return torch.nn.BatchNorm1d(L.c_in) if flat_batchnorm(L) else torch.nn.BatchNorm2d(L.c_in)


class ParityNet(torch.nn.Module):
    """A parity model as a torch module: submodule `layer<l>` is parity's layer
    l, so state_dict() names and orders its tensors as parity's .npz does. Takes
    x (B, features) as parity stores samples; returns the logits (B, classes).
    With `capture` set to a Capture, forward records every layer's output."""

    def __init__(self, model, dtype=torch.float64):
        super().__init__()
        self.model = model
        for L in model.layers:
            self.add_module(f"layer{L.index}", layer_module(L).to(torch_dtype(dtype)))
        self.capture = None

    def forward(self, x):
        B = x.shape[0]
        for L in self.model.layers:
            z = getattr(self, f"layer{L.index}")(x.reshape((B,) + in_shape(L)))
            x = ACT_FUNCS[L.act](z) if L.act != "none" else z
            if self.capture is not None:
                self.capture.record(L.index, z, x)
        return x.reshape(B, -1)


def model_from_spec(spec, act="relu", dtype=torch.float64):
    """ParityNet of a parity model spec (mlp:... with hidden activation `act`,
    or cnn:...), its parameters in dtype ('f32', 'f64' or a torch dtype)."""
    return ParityNet(spec_mod.parse(spec, act), dtype)


# ---------------------------------------------------------------- state

def load_weights(net, state):
    """Copies parity's views {name: array} into net's parameters and buffers."""
    mine = net.state_dict()
    missing = [n for n in mine if n not in state]
    if missing:
        raise KeyError(f"state has no array '{missing[0]}' for the torch model")
    with torch.no_grad():
        for name, t in mine.items():
            a = np.asarray(state[name])
            if name.endswith(COUNT):
                t.fill_(int(a.reshape(-1)[0]))
                continue
            if a.size != t.numel():
                raise ValueError(f"{name}: parity's shape {a.shape}, torch's {tuple(t.shape)}")
            t.copy_(torch.from_numpy(a.astype(NUMPY_DTYPES[t.dtype])).reshape(t.shape))


def weights(net, dtype):
    """{name: array} of net's parameters and buffers as parity's views, in dtype."""
    dt = npz.dtype_of(dtype)
    out = {}
    for name, t in net.state_dict().items():
        a = t.detach().cpu().numpy()
        out[name] = np.array([a], dt) if name.endswith(COUNT) else a.astype(dt, copy=True)
    return out


def make_optimizer(net, optim, dtype):
    """The torch optimizer of parity's `optim` {name, lr, momentum, beta1,
    beta2, eps} over net's parameters, every hyperparameter rounded once to
    the dtype as parity does."""
    dt = npz.dtype_of(dtype).type
    h = {k: float(dt(v)) for k, v in optim.items() if k != "name"}
    ps, name = list(net.parameters()), optim["name"]
    if name == "sgd":
        return torch.optim.SGD(ps, lr=h["lr"])
    if name in ("momentum", "nesterov"):
        return torch.optim.SGD(ps, lr=h["lr"], momentum=h["momentum"],
                               nesterov=name == "nesterov")
    if name == "adam":
        return torch.optim.Adam(ps, lr=h["lr"], betas=(h["beta1"], h["beta2"]), eps=h["eps"])
    raise ValueError(f"optimizer '{name}': expected sgd, momentum, nesterov or adam")


# parity's optimizer state arrays and torch's state keys, in the same order.
TORCH_STATE = {"sgd": (), "momentum": ("momentum_buffer",), "nesterov": ("momentum_buffer",),
               "adam": ("exp_avg", "exp_avg_sq")}


def load_optimizer(opt, net, optim_name, state, optim_t):
    """Sets the torch optimizer's state from parity's `opt.<state>.<view>`
    arrays and optim_t (Adam's step count)."""
    opt.state.clear()
    for name, p in net.named_parameters():
        st = opt.state[p]
        for ours, theirs in zip(spec_mod.OPTIM_STATES[optim_name], TORCH_STATE[optim_name]):
            a = np.asarray(state[f"opt.{ours}.{name}"])
            st[theirs] = torch.from_numpy(a.astype(NUMPY_DTYPES[p.dtype])).reshape(p.shape)\
                .to(p.device)
        if optim_name == "adam":
            st["step"] = torch.tensor(float(optim_t))


def optimizer_arrays(opt, net, optim_name, dtype, like):
    """parity's `opt.<state>.<view>` arrays of the torch optimizer's state. Views
    that are not parameters (batchnorm statistics) have no gradient, so their
    state is that of `like` (the state the step started from), unchanged."""
    dt = npz.dtype_of(dtype)
    params = dict(net.named_parameters())
    out = {}
    for ours, theirs in zip(spec_mod.OPTIM_STATES[optim_name], TORCH_STATE[optim_name]):
        for name, _ in net.model.views():
            key = f"opt.{ours}.{name}"
            if name in params:
                t = opt.state[params[name]].get(theirs)
                out[key] = (np.zeros(params[name].shape, dt) if t is None
                            else t.detach().cpu().numpy().astype(dt, copy=True))
            else:
                out[key] = np.asarray(like[key]).astype(dt, copy=True)
    return out


def load_state(net, opt, optim_name, state, optim_t):
    """A full parity state (views and optimizer state) into net and opt."""
    load_weights(net, state)
    load_optimizer(opt, net, optim_name, state, optim_t)


def full_state(net, opt, optim_name, dtype, like):
    """The full parity state {name: array} of net and opt (see optimizer_arrays)."""
    return {**weights(net, dtype), **optimizer_arrays(opt, net, optim_name, dtype, like)}


# ---------------------------------------------------------------- intermediates

class Capture:
    """Set as net.capture for one forward pass: keeps each layer's output before
    its activation z (its gradient retained for backward) and after it y."""

    def __init__(self):
        self.z, self.y = {}, {}

    def record(self, index, z, y):
        if z.requires_grad:
            z.retain_grad()
        self.z[index], self.y[index] = z, y

    def arrays(self, dz_scale=1.0):
        """This rank's layer<l>.out and layer<l>.dz rows as numpy arrays; the
        gradients times dz_scale (from the loss this rank differentiated to the
        batch mean loss)."""
        out = {}
        for l, y in self.y.items():
            B = y.shape[0]
            out[f"layer{l}.out"] = y.detach().reshape(B, -1).cpu().numpy().copy()
            g = self.z[l].grad
            if g is not None:
                out[f"layer{l}.dz"] = (g * dz_scale if dz_scale != 1 else g).reshape(B, -1)\
                    .cpu().numpy().copy()
        return out


def gradients(net):
    """grad.<view> of every parameter: the gradient the optimizer will use."""
    return {f"grad.{n}": p.grad.detach().cpu().numpy().copy() for n, p in net.named_parameters()
            if p.grad is not None}


def sample_losses(logits, labels):
    """Each sample's cross-entropy (B,), as parity's loss.samples."""
    return torch.nn.functional.cross_entropy(logits, labels, reduction="none")


# ---------------------------------------------------------------- ranks

def distributed():
    """(rank, world) of the torch.distributed group, (0, 1) without one."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def broadcaster():
    """A Session's broadcast function over torch.distributed (rank 0's object
    to every rank)."""
    def broadcast(obj):
        box = [obj]
        dist.broadcast_object_list(box, src=0)
        return box[0]
    return broadcast


def gather_rows(arrays):
    """Rank 0: {name: array} of every rank's rows concatenated in rank order
    (the ranks hold contiguous parts of the batch); other ranks: None."""
    rank, world = distributed()
    if world == 1:
        return arrays
    parts = [None] * world if rank == 0 else None
    dist.gather_object(arrays, parts, dst=0)
    if rank != 0:
        return None
    return {k: np.concatenate([p[k] for p in parts]) for k in arrays}
