"""Compile a Triton or Gluon kernel for sm_90 on a machine without a GPU and report what costs no device time.

Triton's wheel ships ptxas and cuobjdump, so the SASS of a kernel can be read here: registers, spills, shared
memory, and an instruction histogram of every loop (a backward branch). Integer arguments and pointers are marked
16-divisible the way the JIT specializes them at run time (``plain=``: arguments that are not, e.g. a stride of 1 or
odd sizes). Run it in a process without TRITON_INTERPRET (the tests start one: ``verify_sass.py``).
"""
from __future__ import annotations

import collections
import inspect
import os
import re
import subprocess
import tempfile

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource


def compile_sm90(kernel, types: dict, constexprs: dict, plain=(), num_warps=4, num_stages=3, source=ASTSource,
                 **opts):
    params = list(inspect.signature(kernel.fn).parameters)
    sig, attrs = {}, {}
    for i, p in enumerate(params):
        if p in constexprs:
            sig[p] = "constexpr"
            continue
        sig[p] = types.get(p, "*u8" if p.endswith("_ptr") else "i32")
        if p not in plain and (sig[p].startswith("*") or sig[p] in ("i32", "i64")):
            attrs[(i,)] = [["tt.divisibility", 16]]
    src = source(kernel, sig, constexprs={(params.index(k),): v for k, v in constexprs.items()}, attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32),
                          options=dict(num_warps=num_warps, num_stages=num_stages, **opts))


def _cuobjdump(cc, flag) -> str:
    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cc.asm["cubin"])
        f.flush()
        return subprocess.run([tool, flag, f.name], capture_output=True, text=True, check=True).stdout


def sass(cc) -> str:
    return _cuobjdump(cc, "-sass")


def resources(cc) -> str:
    m = re.search(r"REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)", _cuobjdump(cc, "-res-usage"))
    return f"regs={m.group(1)} stack={m.group(2)} local={m.group(4)} smem={cc.metadata.shared}" if m else "?"


def loops(text: str):
    """(instructions, [(first, last, Counter of opcodes)] for every backward branch, innermost first)."""
    ins = []
    for line in text.splitlines():
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?);", line)
        if m:
            ins.append((int(m.group(1), 16), m.group(2).strip()))
    where = {a: i for i, (a, _) in enumerate(ins)}
    out = []
    for i, (a, t) in enumerate(ins):
        m = re.search(r"BRA\s.*?0x([0-9a-f]+)", t)
        if m and int(m.group(1), 16) < a and int(m.group(1), 16) in where:
            s = where[int(m.group(1), 16)]
            out.append((ins[s][0], a, collections.Counter(re.sub(r"^@!?U?P\w+\s+", "", t).split()[0]
                                                            for _, t in ins[s: i + 1])))
    return len(ins), out


def report(cc, label=""):
    n, ls = loops(sass(cc))
    print(f"== {label}: {resources(cc)} total_instr={n}")
    for a, b, h in ls:
        print(f"  loop {a:#x}-{b:#x}: {sum(h.values())} instr: " + ", ".join(f"{k}:{v}" for k, v in h.most_common(28)))
