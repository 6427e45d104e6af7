"""`sgl_kernel.speculative` as imported by sglang.srt.speculative.ngram_worker (test-only shim)."""
from ._tree_ops import reconstruct_indices_from_tree_mask  # noqa: F401
from . import __getattr__  # noqa: F401  (other names: NotImplementedError stubs, as in the package)
