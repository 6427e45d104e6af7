"""Make the PyPI (CUDA-built) torchvision importable on a CPU torch (test-only; see sitecustomize.py for why).

`install()` arms a one-shot import hook; it is called by sitecustomize.py in server processes and by
tests/conftest.py in the pytest process (transformers 5.x imports torchvision even for LlamaConfig).
"""
import glob
import importlib.util
import os
import sys


def _define_torchvision_schemas():
    spec = importlib.util.find_spec("torchvision")
    if spec is None or not spec.submodule_search_locations:
        return
    import torch

    for lib in glob.glob(os.path.join(spec.submodule_search_locations[0], "_C*.so")):
        try:
            torch.ops.load_library(lib)
            return  # a working extension defines the real ops
        except OSError:
            pass
    if hasattr(torch.ops.torchvision, "nms"):
        return
    global _TORCHVISION_LIB  # the Library object must outlive this function or the defs are dropped
    _TORCHVISION_LIB = torch.library.Library("torchvision", "DEF")
    for op in ("nms", "qnms"):
        _TORCHVISION_LIB.define(f"{op}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")

        def _unsupported(*args, _op=op, **kwargs):
            raise NotImplementedError(f"torchvision::{_op} is a schema-only stand-in (tests/shims)")

        _TORCHVISION_LIB.impl(op, _unsupported, "CompositeExplicitAutograd")


class _BeforeTorchvision:
    """Runs the fix when `torchvision` is first imported, not at every interpreter start (importing torch here
    would cost every unrelated Python process a second or two)."""

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name != "torchvision":
            return None
        sys.meta_path.remove(cls)  # once; also keeps find_spec("torchvision") below from recursing
        try:
            _define_torchvision_schemas()
        except Exception as exc:  # never break the import itself; torchvision's own error will then show
            print(f"tests/shims/torchvision_fix: torchvision schema shim failed: {exc!r}", file=sys.stderr)
        return None  # let the normal finders import torchvision


def install():
    """Idempotent. Does nothing if torchvision is already imported (too late to help, or already fine)."""
    if "torchvision" not in sys.modules and _BeforeTorchvision not in sys.meta_path:
        sys.meta_path.insert(0, _BeforeTorchvision)
