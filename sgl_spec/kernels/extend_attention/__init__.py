"""``extend_attention``: the EXTEND (prefill) attention of a whole batch under the INT8 view; contract in
docs/CONTRACTS.md; the Triton engine in ``triton.py``, the FA3 engine in ``fa3.py`` (two calls merged, its plan
``PagedPlan``) and in ``fa3_segments.py`` (one call, ``SegmentPlan``), the pure-torch twin in ``ref.py``, the batch
layouts in ``plan.py``. Which engine the backend takes is sgl_spec/kernels/engine.py's ``prefill_engine``."""
from sgl_spec.kernels.engine import use_triton
from sgl_spec.kernels.extend_attention.plan import (ExtendPlan, PagedPlan, SegmentPlan, block_tokens,  # noqa: F401
                                                    extend_plan, paged_plan, segment_plan, spans)


def extend_attention(q, *args, **kw):
    if use_triton(q):
        from sgl_spec.kernels.extend_attention.triton import extend_attention as impl
    else:
        from sgl_spec.kernels.extend_attention.ref import extend_attention as impl
    return impl(q, *args, **kw)
