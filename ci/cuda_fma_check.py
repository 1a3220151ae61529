#!/usr/bin/env python3
"""No multiply and add contracted in the CUDA kernels where the contract has two roundings.

Usage: cuda_fma_check.py KERNELS.ptx [LIBRARY.a]
       cuda_fma_check.py --control NVCC SOURCE -I... (a negative control, below)

The PTX of src/cuda/cuda_kernels.cu (built with -fmad=false) must hold:
  - every f32/f64 add, sub and mul with an explicit rounding (add.rn.f32 ...):
    ptxas never fuses those into an fma; no mad, no .ftz, no .approx;
  - no float min or max (their -0 and NaN results need not be the C comparison's);
  - fma.rn only in the kernels whose bodies write fma (FMA_KERNELS: the dense
    forward, input gradient and gradient; conv forward, input gradient and
    gradient parts; batchnorm's squares, output and gradient parts; the dense
    gradient's chunk parts of several ranks), and at least one there.
Where cuobjdump runs (CUDA toolkit with it; the GPU machine has it), the SASS of
LIBRARY.a too: in every kernel whose PTX has no float division, square root or
reciprocal (their IEEE expansions bring multiplies, adds and fmas of their own),
at least as many FMUL/DMUL as the PTX has mul.rn and as many FADD/DADD as it has
add.rn and sub.rn. ptxas fusing a multiply and an add into an fma removes one of
each; unrolling a loop only adds. Exit 0 if all hold, 1 with the failures listed.

--control compiles SOURCE twice (-fmad=false, then -fmad=true) and checks that
the first passes and the second fails, in the PTX and, with cuobjdump, in the
SASS (there ptxas fuses the unrounded mul and add): the check can fail.
"""
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile

FMA_KERNELS = ("forward_", "backward_data_", "grad_update_", "conv_forward_", "conv_tile_",
               "conv_wtile_", "conv_dtile_", "conv_grad_part_", "conv_backward_data_",
               "bn_chain_", "bn_out_", "dense_grad_part_")


def entries(ptx):
    """Kernel name -> its PTX lines (the .entry bodies; .func bodies too)."""
    out, name = collections.OrderedDict(), None
    for line in ptx.splitlines():
        m = re.match(r"(?:\.visible\s+|\.weak\s+)?\.(?:entry|func)\s+(?:\([^)]*\)\s*)?(\w+)", line)
        if m:
            name = m.group(1)
            out[name] = []
        elif name is not None:
            out[name].append(line)
    return out


def demangle(name):
    """_Z11forward_f32PfPKf... -> forward_f32 (the length-prefixed name)."""
    m = re.match(r"_Z(\d+)", name)
    return name[m.end():m.end() + int(m.group(1))] if m else name


def check_ptx(ptx):
    """Failures, and per kernel its PTX counts (fma, mul, add + sub, has division/sqrt)."""
    bad = []
    counts = {}
    for name, lines in entries(ptx).items():
        short = demangle(name)
        text = "\n".join(lines)
        for op in re.findall(r"\b(?:add|sub|mul)\.f(?:32|64)\b", text):
            bad.append(f"{short}: {op} without a rounding modifier (ptxas may fuse it)")
        for op in re.findall(r"\b(?:mad|mad\.rn)\.f(?:32|64)\b|\.ftz\b|\.approx\b", text):
            bad.append(f"{short}: {op}")
        for op in re.findall(r"\b(?:min|max)(?:\.\w+)*\.f(?:32|64)\b", text):
            bad.append(f"{short}: {op} (a float min/max)")
        n = len(re.findall(r"\bfma\.rn\.f(?:32|64)\b", text))
        counts[short] = {
            "fma": n,
            "mul": len(re.findall(r"\bmul(?:\.rn)?\.f(?:32|64)\b", text)),
            "add": len(re.findall(r"\b(?:add|sub)(?:\.rn)?\.f(?:32|64)\b", text)),
            "expands": bool(re.search(r"\b(?:div|sqrt|rcp)(?:\.\w+)*\.f(?:32|64)\b", text)),
        }
        writes_fma = short.startswith(FMA_KERNELS)
        if n and not writes_fma:
            bad.append(f"{short}: {n} fma.rn where the source writes none")
        if writes_fma and n == 0:
            bad.append(f"{short}: no fma.rn where the source writes fma chains")
    return bad, counts


def find_cuobjdump():
    for c in (shutil.which("cuobjdump"), "/usr/local/cuda/bin/cuobjdump"):
        if c and os.access(c, os.X_OK):
            return c
    return None


def check_sass(binary, counts, quiet=False):
    """Failures of the SASS of binary (an object, library or cubin) against the PTX counts."""
    tool = find_cuobjdump()
    if not tool:
        print("SASS: not checked (no cuobjdump on this machine)")
        return []
    sass = subprocess.run([tool, "-sass", binary], capture_output=True, text=True,
                          check=True).stdout
    bad, seen = [], 0
    for block in re.split(r"\n\s*Function : ", sass)[1:]:
        short = demangle(block.split()[0])
        if short not in counts:
            continue
        c = counts[short]
        fma = len(re.findall(r"\b[DF]FMA\b", block))
        mul = len(re.findall(r"\b[DF]MUL\b", block))
        add = len(re.findall(r"\b[DF]ADD\b", block))
        if not quiet:
            print(f"SASS {short}: {fma} FFMA/DFMA, {mul} FMUL/DMUL, {add} FADD/DADD; PTX "
                  f"{c['fma']} fma, {c['mul']} mul, {c['add']} add/sub"
                  + (" (division/sqrt expansions: not compared)" if c["expands"] else ""))
        if c["expands"]:
            continue
        seen += 1
        if mul < c["mul"] or add < c["add"] or fma < c["fma"]:
            bad.append(f"{short}: SASS has {mul} multiplies, {add} adds, {fma} fmas; the PTX "
                       f"{c['mul']}, {c['add']}, {c['fma']}: a multiply and an add fused")
    if seen == 0:
        bad.append("SASS: no kernel compared (cuobjdump output not understood)")
    return bad


def control(nvcc, src, flags):
    """-fmad=false passes; -fmad=true fails in its PTX and, with cuobjdump, in its SASS
    measured against the -fmad=false PTX: the source's rounded multiplies and adds."""
    sass = find_cuobjdump() is not None
    with tempfile.TemporaryDirectory() as d:
        results, ref = [], None
        for fmad in ("false", "true"):
            base = [nvcc, "-std=c++17", "-arch=sm_90", f"-fmad={fmad}", *flags, src]
            ptx, cubin = os.path.join(d, f"k_{fmad}.ptx"), os.path.join(d, f"k_{fmad}.cubin")
            subprocess.run(base + ["-ptx", "-o", ptx], check=True)
            with open(ptx) as f:
                bad, counts = check_ptx(f.read())
            ref = ref or counts
            sbad = []
            if sass:
                subprocess.run(base + ["-cubin", "-o", cubin], check=True)
                sbad = check_sass(cubin, ref, quiet=True)
            results.append((bad, sbad))
    (p0, s0), (p1, s1) = results
    print(f"control: -fmad=false: {len(p0)} PTX, {len(s0)} SASS failures; "
          f"-fmad=true: {len(p1)} PTX, {len(s1)} SASS failures"
          + ("" if sass else " (SASS not checked: no cuobjdump)"))
    for b in (p1[:2] + s1[:2]):
        print(f"  -fmad=true: {b}")
    ok = not p0 and not s0 and bool(p1) and (bool(s1) or not sass)
    return 0 if ok else 1


def main(argv):
    if len(argv) >= 3 and argv[0] == "--control":
        return control(argv[1], argv[2], argv[3:])
    if not argv:
        print(__doc__)
        return 2
    with open(argv[0]) as f:
        bad, counts = check_ptx(f.read())
    for k, c in counts.items():
        print(f"PTX {k}: {c['fma']} fma.rn, {c['mul']} mul.rn, {c['add']} add/sub.rn"
              + (" (has division/sqrt)" if c["expands"] else ""))
    if not counts:
        bad.append("PTX: no kernel found")
    if len(argv) > 1:
        bad += check_sass(argv[1], counts)
    for b in bad:
        print("FAIL:", b)
    print("contraction check:", "FAIL" if bad else "ok")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
