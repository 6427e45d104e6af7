"""``draft_decode``: contract in docs/CONTRACTS.md; the Triton engine in ``triton.py``, the pure-torch twin in ``ref.py``."""
from sgl_spec.kernels.engine import use_triton


def draft_decode(q, *args, **kw):
    if use_triton(q):
        from sgl_spec.kernels.draft_decode.triton import draft_decode as impl
    else:
        from sgl_spec.kernels.draft_decode.ref import draft_decode as impl
    return impl(q, *args, **kw)
