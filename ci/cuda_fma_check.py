#!/usr/bin/env python3
"""No multiply and add contracted in the CUDA kernels where the contract has two roundings.

Usage: cuda_fma_check.py KERNELS.ptx [LIBRARY.a]
       cuda_fma_check.py --control NVCC SOURCE -I... (a negative control, below)

The PTX of src/cuda/cuda_kernels.cu (built with -fmad=false) must hold:
  - every f32/f64 add, sub and mul with an explicit rounding (add.rn.f32 ...):
    ptxas never fuses those into an fma; no mad, no .ftz, no .approx;
  - no float min or max (their -0 and NaN results need not be the C comparison's);
  - fma.rn only in the kernels whose bodies write fma (forward, backward_data,
    grad_update), and at least one there.
Where cuobjdump runs (CUDA toolkit with it; the GPU machine has it), the SASS of
LIBRARY.a too: in every kernel whose PTX has no division, square root or reciprocal
(their IEEE expansions use fma internally), the FFMA + DFMA count equals the PTX's
fma.rn count, so ptxas added none. Exit 0 if all hold, 1 with the failures listed.

--control compiles SOURCE to PTX twice (-fmad=false, then -fmad=true) and checks
that the first passes and the second fails: the check can fail.
"""
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile

FMA_KERNELS = ("forward_", "backward_data_", "grad_update_")


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
    bad = []
    fma_count = {}
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
        fma_count[short] = (n, bool(re.search(r"\b(?:div|sqrt|rcp)(?:\.\w+)*\.f(?:32|64)\b", text)))
        writes_fma = short.startswith(FMA_KERNELS)
        if n and not writes_fma:
            bad.append(f"{short}: {n} fma.rn where the source writes none")
        if writes_fma and n == 0:
            bad.append(f"{short}: no fma.rn where the source writes fma chains")
    return bad, fma_count


def find_cuobjdump():
    for c in (shutil.which("cuobjdump"), "/usr/local/cuda/bin/cuobjdump"):
        if c and os.access(c, os.X_OK):
            return c
    return None


def check_sass(lib, fma_count):
    tool = find_cuobjdump()
    if not tool:
        print("SASS: not checked (no cuobjdump on this machine)")
        return []
    sass = subprocess.run([tool, "-sass", lib], capture_output=True, text=True, check=True).stdout
    bad, seen = [], 0
    for block in re.split(r"\n\s*Function : ", sass)[1:]:
        short = demangle(block.split()[0])
        if short not in fma_count:
            continue
        ptx_n, expands = fma_count[short]
        sass_n = len(re.findall(r"\b[DF]FMA\b", block))
        print(f"SASS {short}: {sass_n} FFMA/DFMA, PTX {ptx_n} fma.rn"
              + (" (division/sqrt expansions: not compared)" if expands else ""))
        if not expands:
            seen += 1
            if sass_n != ptx_n:
                bad.append(f"{short}: SASS has {sass_n} FFMA/DFMA, the PTX {ptx_n} fma.rn")
    if seen == 0:
        bad.append("SASS: no kernel compared (cuobjdump output not understood)")
    return bad


def control(nvcc, src, flags):
    with tempfile.TemporaryDirectory() as d:
        results = []
        for fmad in ("false", "true"):
            out = os.path.join(d, f"k_{fmad}.ptx")
            subprocess.run([nvcc, "-ptx", "-std=c++17", "-arch=sm_90", f"-fmad={fmad}", *flags,
                            src, "-o", out], check=True)
            with open(out) as f:
                results.append(check_ptx(f.read())[0])
    ok = not results[0] and bool(results[1])
    print(f"control: -fmad=false: {len(results[0])} failures; -fmad=true: {len(results[1])}")
    for b in results[1][:3]:
        print(f"  -fmad=true: {b}")
    return 0 if ok else 1


def main(argv):
    if len(argv) >= 3 and argv[0] == "--control":
        return control(argv[1], argv[2], argv[3:])
    if not argv:
        print(__doc__)
        return 2
    with open(argv[0]) as f:
        bad, fma_count = check_ptx(f.read())
    for k, (n, expands) in fma_count.items():
        print(f"PTX {k}: {n} fma.rn{' (has division/sqrt)' if expands else ''}")
    if len(fma_count) == 0:
        bad.append("PTX: no kernel found")
    if len(argv) > 1:
        bad += check_sass(argv[1], fma_count)
    for b in bad:
        print("FAIL:", b)
    print("contraction check:", "FAIL" if bad else "ok")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
