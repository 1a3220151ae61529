#!/usr/bin/env python3
"""PyTorch DistributedDataParallel (gloo, CPU) under parity's step protocol:
any parity model (MLP, the MNIST CNN, CNNs with batchnorm) and optimizer
(SGD, momentum, nesterov, Adam), built by parity_ext.torch_helper.

    parity lockstep --external 'torchrun --nproc_per_node 2 python/examples/torch_ddp.py' \\
        --dataset mnist --model cnn:1x28x28-c32k3p1-r-f-fc128-r-fc10 --optim adam --lr 0.001

Each rank takes a contiguous part of every batch (uneven when the world does
not divide it). Without torchrun (no RANK in the environment) it runs as one
plain process, no process group. Batchnorm normalises with each rank's own
part of the batch, as DDP users have it, so with batchnorm and world > 1 it
trains another model than one process: parity says so.

One torch thread per process (--threads): on a shared CPU more threads fight
(see docs/external.md). --bug NAME makes it one of the negative controls.
--device cuda runs it on the GPU (rank r on GPU r modulo the GPUs, nccl
between ranks); there --tf32 lets matmuls and convolutions use TF32, and
--nondeterministic leaves torch's deterministic algorithms off.
"""
import os
import sys

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from parity_ext import Session, faults, serve   # noqa: E402
from parity_ext import torch_helper as th   # noqa: E402


def tf32_hook(module, inputs, out):
    """Forward hook: the module's output rounded to a 10-bit mantissa (TF32),
    the gradient passed through unchanged."""
    low = torch.from_numpy(faults.round_mantissa(out.detach().cpu().numpy())).to(out.device)
    return out + (low - out).detach()


class DDPTrainer:
    """One DDP step on this rank's part of the batch, for parity_ext.serve."""

    def __init__(self, hello, rank, world, bug, device):
        self.hello, self.rank, self.world, self.bug = hello, rank, world, bug
        self.device = device
        self.net = th.ParityNet(hello.model, th.torch_dtype(hello.dtype)).to(device)
        if bug == "tf32":
            self.net.layer0.register_forward_hook(tf32_hook)
        if bug == "unreduced":   # DDP never reduces the last layer's weight gradient
            DDP._set_params_and_buffers_to_ignore_for_model(self.net, [hello.model.parameters()[-2]])
        ids = [device.index] if device.type == "cuda" else None
        self.model = DDP(self.net, device_ids=ids) if dist.is_initialized() else self.net
        optim = dict(hello.optim, lr=hello.optim["lr"] * (1 + 1e-3 if bug == "lr" else 1))
        self.opt = th.make_optimizer(self.net, optim, hello.dtype)
        self.start, self.previous = None, None

    def load(self, get_state, optim_t):
        state = get_state()
        if self.bug == "stale" and self.rank == self.world - 1:
            state, self.previous = self.previous or state, state   # the last step's weights
        th.load_state(self.net, self.opt, self.hello.optim["name"], state, optim_t)
        self.start = state

    def step(self, get_batch, t, want):
        b = get_batch()
        B = len(b["labels"])
        part = np.array_split(np.arange(B), self.world)[self.rank]
        x = torch.from_numpy(b["x"][part]).to(self.device)
        labels = torch.from_numpy(b["labels"][part].astype(np.int64)).to(self.device)
        if self.bug == "drop" and self.rank == self.world - 1:
            x, labels = x[:-1], labels[:-1]   # one sample left out
        self.net.capture = th.Capture() if want else None
        self.model.train()
        self.opt.zero_grad()
        losses = th.sample_losses(self.model(x), labels)
        # DDP averages the ranks' gradients over the world size W. With each
        # rank's loss the SUM of its samples' losses times W / B, that average
        # is the gradient of the batch mean loss, even when the parts are
        # uneven (a mean per rank would weight a short part too much).
        # --bug world: the average taken as if over W + 1 processes.
        w_avg = self.world + 1 if self.bug == "world" else self.world
        (losses.sum() * w_avg / B).backward()
        if not (self.bug == "stale" and self.rank == self.world - 1 and t == 1):
            self.opt.step()   # --bug stale: the last rank skips its first update
        rows = {"loss.samples": losses.detach().cpu().numpy()}
        if want:   # z.grad is d(this rank's loss)/dz = W x d(batch mean loss)/dz
            rows.update(self.net.capture.arrays(dz_scale=1.0 / self.world))
        self.net.capture = None
        rows = th.gather_rows(rows)
        if self.rank != 0:
            return None, None
        loss = float(np.sum(rows["loss.samples"], dtype=np.float64) / B)
        return loss, {**rows, **th.gradients(self.net)} if want else None

    def state(self):
        if self.rank != 0:
            return None
        return th.full_state(self.net, self.opt, self.hello.optim["name"], self.hello.dtype,
                             self.start)


def main(argv):
    ap = faults.parser(__doc__)
    ap.add_argument("--threads", type=int, default=1, help="torch threads per process (1)")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where to train (cpu)")
    ap.add_argument("--tf32", action="store_true", help="cuda: allow TF32 in matmuls and convolutions")
    ap.add_argument("--nondeterministic", action="store_true",
                    help="leave torch's deterministic algorithms off")
    o = ap.parse_args(argv)
    torch.set_num_threads(o.threads)
    torch.use_deterministic_algorithms(not o.nondeterministic)
    if o.device == "cuda":   # deterministic cuBLAS needs a fixed workspace
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.backends.cuda.matmul.allow_tf32 = o.tf32
    torch.backends.cudnn.allow_tf32 = o.tf32
    launched = "RANK" in os.environ and "MASTER_ADDR" in os.environ
    if launched:
        dist.init_process_group("nccl" if o.device == "cuda" else "gloo")
    rank, world = th.distributed()
    device = torch.device("cpu")
    if o.device == "cuda":
        device = torch.device("cuda", rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
    try:
        with Session(name="torch-ddp", rank=rank, world=world,
                     broadcast=th.broadcaster() if launched else None, intermediates=True) as s:
            serve(s, DDPTrainer(s.hello, rank, world, o.bug, device))
    finally:
        if launched:
            dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
