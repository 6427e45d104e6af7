"""Test-wide setup. Without CUDA, Triton kernels run under the interpreter: the flag must be set before triton is
imported anywhere, so it is set here, at the top of the test session."""
import os
import sys
from pathlib import Path

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402

_HERE = Path(__file__).resolve().parent
# transformers 5.x imports torchvision even for LlamaConfig, and PyPI's CUDA-built torchvision needs the test-only fix
# (tests/shims/torchvision_fix.py) to import beside a CPU torch; sgl_kernel's stand-in is never imported in-process
sys.path.insert(0, str(_HERE / "shims"))
import torchvision_fix  # noqa: E402

torchvision_fix.install()
sys.path.remove(str(_HERE / "shims"))
sys.path.insert(0, str(_HERE / "support"))  # tests import the helpers: harness, oracle, tinymodel, toy_worker, ...

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.fixture
def device():
    return DEVICE


def pytest_collection_modifyitems(config, items):
    """``gpu`` tests need CUDA; ``interp`` tests (CPU tensors, kernels under the interpreter) run only where the
    interpreter is on, i.e. without CUDA: a test marked both runs on either."""
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device")
    skip_interp = pytest.mark.skip(reason="Triton-interpreter test on CPU tensors: runs where CUDA is absent")
    cuda = torch.cuda.is_available()
    for item in items:
        if "gpu" in item.keywords and not cuda:
            item.add_marker(skip_gpu)
        elif "interp" in item.keywords and "gpu" not in item.keywords and cuda:
            item.add_marker(skip_interp)


@pytest.fixture(autouse=True)
def _interpreter_scalar_index(monkeypatch):
    """Triton 3.6's interpreter keeps scalars as 1-element arrays and turns them into loop bounds with ``int(array)``,
    which numpy >= 2.4 rejects, so ``range(lo, hi)`` over loaded values fails. Patch ``__index__`` to take the single
    element (interpreter only)."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        return
    import triton.runtime.interpreter as interp

    orig = interp._patch_lang_tensor

    def patched(tensor, scope):
        orig(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))

    monkeypatch.setattr(interp, "_patch_lang_tensor", patched)


@pytest.fixture(scope="session")
def tiny_llama_fp32(tmp_path_factory):
    """Tiny random Llama in float32 (exact comparisons against Hugging Face)."""
    from tinymodel import make_tiny_llama

    return make_tiny_llama(tmp_path_factory.mktemp("tiny-llama-fp32"), dtype="float32")
