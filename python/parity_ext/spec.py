"""parity's model specs (`mlp:784-256-128-10`, `cnn:1x28x28-c32k3p1-r-f-fc128-r-fc10`)
parsed into layers and named views, with parity's layer numbering and view
order (src/model/par_model.c is the definition; docs/cnn.md the user's guide).

Not a model: no arithmetic here (torch_helper.py builds a torch module from a
Model). Tested against the names and shapes of parity's own .npz files
(python/tests/test_spec.py).
"""
import re
from dataclasses import dataclass, field

ACTS = ("relu", "sigmoid", "tanh")
ACT_TOKENS = {"r": "relu", "sg": "sigmoid", "th": "tanh"}
BN_VIEWS = ("weight", "bias", "running_mean", "running_var", "num_batches_tracked")
OPTIM_STATES = {"sgd": (), "momentum": ("velocity",), "nesterov": ("velocity",),
                "adam": ("m", "v")}
MAX_LAYERS = 16
MAX_SIZE = 1 << 24


class SpecError(ValueError):
    """A model spec parity would refuse; the message names the spec and token."""


@dataclass
class Layer:
    """One parity layer: `index` as in `layer<index>.*`, kind 'dense', 'conv2d',
    'maxpool' or 'batchnorm', the activation on its output ('none' if none), its
    input and output shapes (c, h, w; dense: (n, 1, 1)) and conv/pool sizes."""
    index: int
    kind: str
    act: str = "none"
    c_in: int = 0
    h_in: int = 1
    w_in: int = 1
    c_out: int = 0
    h_out: int = 1
    w_out: int = 1
    K: int = 1
    stride: int = 1
    pad: int = 0

    @property
    def n_in(self):
        """Values per sample going in."""
        return self.c_in * self.h_in * self.w_in

    @property
    def n_out(self):
        """Values per sample coming out (the width of layer<l>.out and .dz)."""
        return self.c_out * self.h_out * self.w_out

    def views(self):
        """[(name, shape)] of the layer's parameters and statistics, parity's order."""
        p = f"layer{self.index}."
        if self.kind == "dense":
            return [(p + "weight", (self.c_out, self.c_in)), (p + "bias", (self.c_out,))]
        if self.kind == "conv2d":
            return [(p + "weight", (self.c_out, self.c_in, self.K, self.K)),
                    (p + "bias", (self.c_out,))]
        if self.kind == "batchnorm":
            return [(p + v, (1,) if v == "num_batches_tracked" else (self.c_out,))
                    for v in BN_VIEWS]
        return []


@dataclass
class Model:
    """A parsed spec: its layers in order and the input shape (C, H, W)."""
    spec: str
    input_shape: tuple
    layers: list = field(default_factory=list)

    @property
    def n_inputs(self):
        c, h, w = self.input_shape
        return c * h * w

    @property
    def n_classes(self):
        return self.layers[-1].n_out

    def views(self):
        """[(name, shape)] of every view, in parity's .npz order."""
        return [v for L in self.layers for v in L.views()]

    def parameters(self):
        """The names of the trained views (not batchnorm's running statistics)."""
        return [n for n, _ in self.views()
                if not n.split(".", 1)[1].startswith(("running_", "num_batches"))]

    def feeds_bn(self):
        """Indices of the layers whose output goes straight into a batchnorm: their
        bias has a zero gradient in exact arithmetic (the batch mean removes it)."""
        return {L.index - 1 for L in self.layers if L.kind == "batchnorm"}


def state_names(model, optim):
    """[(name, shape)] of a full state for optimizer `optim`: the views, then
    `opt.<state>.<view>` for each state array (parity's checkpoint layout)."""
    if optim not in OPTIM_STATES:
        raise SpecError(f"optimizer '{optim}': expected one of {', '.join(OPTIM_STATES)}")
    views = model.views()
    return views + [(f"opt.{s}.{n}", shape) for s in OPTIM_STATES[optim] for n, shape in views]


def parse(spec, act="relu"):
    """Model of `spec`; `act` is the hidden activation of an mlp (a cnn writes
    its own). Raises SpecError with parity's rules."""
    if act not in ACTS:
        raise SpecError(f"--act '{act}': expected relu, sigmoid or tanh")
    if spec.startswith("mlp:"):
        return parse_mlp(spec, act)
    if spec.startswith("cnn:"):
        return parse_cnn(spec)
    raise SpecError(f"--model '{spec}': expected mlp:N0-N1-...-Nk or cnn:CxHxW-...")


def size(text, what, lo=1, hi=MAX_SIZE):
    """int(text) if it is a decimal in [lo, hi], else SpecError naming `what`."""
    if not text.isdigit() or not lo <= int(text) <= hi:
        raise SpecError(f"{what}: expected an integer in {lo}..{hi}")
    return int(text)


def dense(index, n_in, n_out, act="none"):
    return Layer(index, "dense", act, c_in=n_in, c_out=n_out)


def parse_mlp(spec, act):
    sizes = [size(t, f"--model '{spec}': size '{t}'") for t in spec[4:].split("-")]
    if len(sizes) < 2:
        raise SpecError(f"--model '{spec}': need at least an input and an output size")
    if len(sizes) > MAX_LAYERS + 1:
        raise SpecError(f"--model '{spec}': at most {MAX_LAYERS} layers")
    layers = [dense(i, sizes[i], sizes[i + 1], act if i + 2 < len(sizes) else "none")
              for i in range(len(sizes) - 1)]
    return Model(spec, (sizes[0], 1, 1), layers)


CONV = re.compile(r"c(\d+)(?:k(\d+))?(?:p(\d+))?(?:s(\d+))?")


def parse_cnn(spec):
    toks = spec[4:].split("-")
    m = re.fullmatch(r"(\d+)x(\d+)x(\d+)", toks[0])
    if not m:
        raise SpecError(f"--model '{spec}': expected an input shape CxHxW first")
    model = Model(spec, tuple(int(v) for v in m.groups()))
    shape, flat = list(model.input_shape), False
    for tok in toks[1:]:
        where = f"--model '{spec}': '{tok}'"
        prev = model.layers[-1] if model.layers else None
        if tok in ACT_TOKENS:
            if not prev or prev.kind not in ("dense", "conv2d", "batchnorm") or prev.act != "none":
                raise SpecError(f"{where} must follow a conv (c...) or fc layer, once")
            prev.act = ACT_TOKENS[tok]
            continue
        if tok == "f":
            if flat:
                raise SpecError(f"--model '{spec}': 'f' given twice")
            shape, flat = [shape[0] * shape[1] * shape[2], 1, 1], True
            continue
        if len(model.layers) >= MAX_LAYERS:
            raise SpecError(f"--model '{spec}': at most {MAX_LAYERS} layers")
        model.layers.append(cnn_layer(len(model.layers), tok, where, shape, flat, prev))
        L = model.layers[-1]
        shape = [L.c_out, L.h_out, L.w_out]
    last = model.layers[-1] if model.layers else None
    if not last or last.kind != "dense" or last.act != "none":
        raise SpecError(f"--model '{spec}': must end with an fc layer without activation")
    return model


def cnn_layer(index, tok, where, shape, flat, prev):
    """The layer of one cnn token (not an activation or 'f') on input `shape`."""
    c, h, w = shape
    if tok == "bn":
        if not prev or prev.kind not in ("dense", "conv2d") or prev.act != "none":
            raise SpecError(f"{where} must follow a conv (c...) or fc layer, before its "
                            "activation")
        return Layer(index, "batchnorm", c_in=c, h_in=h, w_in=w, c_out=c, h_out=h, w_out=w)
    if tok.startswith("fc"):
        if not flat:
            raise SpecError(f"{where}: an fc after an image needs 'f' (flatten) first")
        return dense(index, c * h * w, size(tok[2:], where))
    if flat:
        raise SpecError(f"{where}: only fc layers and activations may follow 'f'")
    if re.fullmatch(r"m\d+", tok):
        K = size(tok[1:], where, 1, 64)
        if K > h or K > w:
            raise SpecError(f"{where}: a {K}x{K} window does not fit a {h}x{w} image")
        return Layer(index, "maxpool", c_in=c, h_in=h, w_in=w, c_out=c, h_out=h // K,
                     w_out=w // K, K=K, stride=K)
    m = CONV.fullmatch(tok)
    if not m:
        raise SpecError(f"{where}: unknown token (expected cN[kK][pP][sS], mK, bn, r, sg, th, "
                        "f or fcN)")
    co = size(m[1], where)
    K, pad, stride = (size(m[2], where, 1, 64) if m[2] else 3,
                      size(m[3], where, 0, 64) if m[3] else 0,
                      size(m[4], where, 1, 64) if m[4] else 1)
    if h + 2 * pad < K or w + 2 * pad < K:
        raise SpecError(f"{where}: a {K}x{K} kernel does not fit a {h}x{w} image padded by {pad}")
    return Layer(index, "conv2d", c_in=c, h_in=h, w_in=w, c_out=co,
                 h_out=(h + 2 * pad - K) // stride + 1, w_out=(w + 2 * pad - K) // stride + 1,
                 K=K, stride=stride, pad=pad)
