"""Which compiled variant of each Triton kernel a launch would use on the GPU, recorded on the CPU.

Triton compiles one binary per *specialization key*: the kernel's constexpr values, each tensor argument's dtype and
whether its address is 16-byte aligned, each integer argument's type (i32 / i64) and whether it equals 1 or is a
multiple of 16 (unless the kernel lists it in ``do_not_specialize`` / ``do_not_specialize_on_alignment``), and the
launch options (``num_warps`` …). A key first seen while the server runs is a compilation on the serving path:
about a second per kernel, during which every request of the batch waits (SGLang 0.5.23 warns "Triton kernel … took
N s to compile after serving started").

``record()`` wraps the interpreter's launch (TRITON_INTERPRET=1): each launch still runs under the interpreter, and
its key is computed by Triton's own binder for an sm_90 target, exactly as ``JITFunction.run`` would on an H100 or
H200. ``keys[kernel name]`` is the set of keys seen.
"""
from __future__ import annotations

import contextlib
from collections import defaultdict

import torch


def _binder_for(interp):
    from triton.backends.compiler import GPUTarget
    from triton.compiler import make_backend
    from triton.runtime import jit as J

    b = getattr(interp, "_sgl_spec_binder", None)
    if b is None:
        fn = J.JITFunction(interp.fn, **{k: v for k, v in interp.kwargs.items()
                                         if k in ("do_not_specialize", "do_not_specialize_on_alignment")})
        backend = make_backend(GPUTarget("cuda", 90, 32))
        b = (J.create_function_from_signature(fn.signature, fn.params, backend), [p.name for p in fn.params])
        interp._sgl_spec_binder = b
    return b


def key_of(interp, args, kwargs) -> tuple:
    """The specialization key of one launch: (parameter, (type, attribute)) per argument + the launch options."""
    binder, names = _binder_for(interp)
    _, spec, _ = binder(*args, **{**kwargs, "debug": False})
    opts = tuple(sorted((k, v) for k, v in kwargs.items() if k not in names and k not in ("grid", "warmup")))
    return tuple(zip(names, (tuple(s) for s in spec))) + opts


def describe(a: tuple, b: tuple) -> str:
    """The parameters whose specialization differs between two keys of one kernel."""
    da, db = dict(a), dict(b)
    return ", ".join(f"{k}: {da.get(k)} vs {db.get(k)}" for k in sorted(set(da) | set(db)) if da.get(k) != db.get(k))


@contextlib.contextmanager
def record():
    """Yield ``keys``: kernel name -> {key: launches}, for every Triton launch inside the block (interpreter only)."""
    from triton.runtime.interpreter import InterpretedFunction

    keys: dict = defaultdict(dict)
    orig = InterpretedFunction.run

    def run(self, *args, grid, warmup, **kwargs):
        k = key_of(self, args, kwargs)
        keys[self.fn.__name__][k] = keys[self.fn.__name__].get(k, 0) + 1
        return orig(self, *args, grid=grid, warmup=warmup, **kwargs)

    InterpretedFunction.run = run
    try:
        yield keys
    finally:
        InterpretedFunction.run = orig
