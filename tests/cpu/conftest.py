"""CPU test setup: make the pytest process itself able to import transformers (it pulls in the CUDA-built PyPI
torchvision, see tests/cpu/shims/torchvision_fix.py) and expose the tiny-model / server helpers as fixtures."""
import sys
from pathlib import Path

import pytest

_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE / "shims"))  # torchvision_fix only; sgl_kernel is never imported in-process
import torchvision_fix  # noqa: E402

torchvision_fix.install()
sys.path.remove(str(_HERE / "shims"))
sys.path.insert(0, str(_HERE))  # so tests can `import harness, tinymodel`


@pytest.fixture(scope="session")
def tiny_llama_fp32(tmp_path_factory):
    """Tiny random Llama in float32 (exact comparisons against Hugging Face)."""
    from tinymodel import make_tiny_llama

    return make_tiny_llama(tmp_path_factory.mktemp("tiny-llama-fp32"), dtype="float32")
