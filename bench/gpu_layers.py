#!/usr/bin/env python3
"""PyTorch's side of ci/gpu.sh's per-layer table: each dense and conv layer of
the MNIST CNN and of the CIFAR CNN with batchnorm, batch 64, f32, TF32 off, on
the GPU, timed as PyTorch runs it (cuBLAS for the dense layers, cuDNN for the
convs; default mode): the forward pass, and the backward pass (the input
gradient where the layer has an input below it, and the weight and bias
gradients). Prints one line per layer and pass: MODEL LAYER PASS SECONDS
TFLOPS, with the flops counted as parity's PARITY_CUDA_PROFILE counts them
(2 multiply-adds a flop pair: forward 2 B macs, backward 4 B macs, 2 B for
the first layer). Usage: gpu_layers.py [REPEATS]"""
import os
import sys
import time

import torch

reps = int(sys.argv[1]) if len(sys.argv) > 1 else 200
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
dev = torch.device(os.environ.get("GPU_LAYERS_DEVICE", "cuda"))   # cpu: a check here
B = 64
# (model, layer index in parity's numbering, kind, shape): conv (c_in, h, w, c_out, K, pad),
# dense (n_in, n_out)
LAYERS = [
    ("mnist-cnn", 0, "conv", (1, 28, 28, 32, 3, 1)),
    ("mnist-cnn", 1, "dense", (25088, 128)),
    ("mnist-cnn", 2, "dense", (128, 10)),
    ("cifar-bn", 0, "conv", (3, 32, 32, 32, 3, 1)),
    ("cifar-bn", 3, "conv", (32, 16, 16, 64, 3, 1)),
    ("cifar-bn", 6, "conv", (64, 8, 8, 128, 3, 1)),
    ("cifar-bn", 9, "dense", (2048, 256)),
    ("cifar-bn", 10, "dense", (256, 10)),
]


def sync():
    if dev.type == "cuda":
        torch.cuda.synchronize()


def timed(fn):
    fn()
    sync()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    sync()
    return (time.perf_counter() - t0) / reps


for model, l, kind, shape in LAYERS:
    if kind == "conv":
        ci, h, w, co, k, pad = shape
        layer = torch.nn.Conv2d(ci, co, k, padding=pad).to(dev)
        x = torch.randn(B, ci, h, w, device=dev, requires_grad=l > 0)
        mac = co * h * w * ci * k * k   # stride 1, the padding keeps h x w
    else:
        n_in, n_out = shape
        layer = torch.nn.Linear(n_in, n_out).to(dev)
        x = torch.randn(B, n_in, device=dev, requires_grad=l > 0)
        mac = n_in * n_out
    y = layer(x)
    g = torch.randn_like(y)
    fwd = timed(lambda: layer(x))
    bwd = timed(lambda: torch.autograd.grad(layer(x), [x, *layer.parameters()] if l > 0
                                            else list(layer.parameters()), g)) - fwd
    back = (4 if l > 0 else 2) * mac * B
    for name, sec, flops in (("fwd", fwd, 2 * mac * B), ("bwd", bwd, back)):
        print(f"{model} {l} {name} {sec:.3e} {flops / sec / 1e12:.3f}")
