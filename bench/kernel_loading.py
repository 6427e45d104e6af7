"""Which kernels bench/bench_kernels.py times: the ops of its ``--kernels`` and, per op, the implementation of
``--impl`` (the server's dispatch, ``sgl_spec.kernels.<op>``, the Triton kernel, or the pure-torch reference) beside its
reference. A missing module is reported and its kernels dropped, so one broken op does not stop the grid."""
from __future__ import annotations

import importlib
import os
import sys

OPS = {"quantize": "quantize_pages", "draft_dense": "draft_decode", "draft_sparse": "draft_decode",
       "verify": "verify_attention", "select": "select_topk_pages"}


def load_kernels(a, log):
    """(impls, refs) for the requested ops; a missing module is reported and its kernels dropped."""
    impls, refs = {}, {}
    from sgl_spec import knobs

    if a.device == "cuda" and a.impl == "ops" and knobs.get("FORCE_REF", "0") == "1":
        sys.exit("SGL_SPEC_FORCE_REF=1 would time the pure-torch references: unset it")
    if a.device == "cpu" and a.impl == "triton":
        if os.environ.get("TRITON_INTERPRET") != "1":
            sys.exit("--impl triton on CPU needs TRITON_INTERPRET=1 in the environment")
        _patch_interpreter_scalar_index()
    for op in sorted({OPS[k] for k in a.kernels}):
        try:
            refs[op] = getattr(importlib.import_module(f"sgl_spec.kernels.{op}.ref"), op)
        except (ImportError, AttributeError) as e:
            log(f"[kernels] {op}: MISSING reference sgl_spec.kernels.{op}.ref ({e}): its kernels are skipped")
            continue
        try:
            triton_fn = getattr(importlib.import_module(f"sgl_spec.kernels.{op}.triton"), op)
        except (ImportError, AttributeError) as e:
            triton_fn = None
            log(f"[kernels] {op}: MISSING Triton module sgl_spec.kernels.{op}.triton ({type(e).__name__}: {e})")
        dispatch = getattr(importlib.import_module(f"sgl_spec.kernels.{op}"), op)  # the server's engine choice
        if a.impl == "ref":
            impls[op] = refs[op]
        elif a.impl == "triton" or a.device == "cuda":
            if triton_fn is None:
                log(f"[kernels] {op}: skipped (no Triton kernel to time)")
                continue
            impls[op] = triton_fn if a.impl == "triton" else dispatch
        else:
            impls[op] = dispatch  # CPU: the dispatch runs the reference
    return impls, refs


def _patch_interpreter_scalar_index():
    """Triton 3.6's interpreter turns 1-element arrays into loop bounds with int(array), which numpy >= 2.4 rejects
    (``range(lo, hi)`` over loaded values); take the single element instead (CPU interpreter smoke only, as
    tests/ops/test_draft_decode.py does)."""
    import triton.runtime.interpreter as interp

    orig = interp._patch_lang_tensor

    def patched(tensor, scope):
        orig(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))

    interp._patch_lang_tensor = patched
