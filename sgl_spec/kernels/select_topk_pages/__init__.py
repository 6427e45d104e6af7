"""``select_topk_pages``: contract in docs/CONTRACTS.md; the Triton engine in ``triton.py``, the pure-torch twin in ``ref.py``."""
from sgl_spec.kernels.engine import use_triton


def select_topk_pages(scores, num_eligible, *args, **kw):
    # scores may be None (score-free selection: streaming pages), num_eligible never is
    if use_triton(num_eligible):
        from sgl_spec.kernels.select_topk_pages.triton import select_topk_pages as impl
    else:
        from sgl_spec.kernels.select_topk_pages.ref import select_topk_pages as impl
    return impl(scores, num_eligible, *args, **kw)
