"""``quantize_pages``: contract in docs/CONTRACTS.md; the Triton engine in ``triton.py``, the pure-torch twin in ``ref.py``."""
from sgl_spec.kernels.engine import use_triton


def quantize_pages(src_k, *args, **kw):
    if use_triton(src_k):
        from sgl_spec.kernels.quantize_pages.triton import quantize_pages as impl
    else:
        from sgl_spec.kernels.quantize_pages.ref import quantize_pages as impl
    return impl(src_k, *args, **kw)
