"""The kernels live inside the package (``sgl_spec/kernels``), so nothing in the repository shadows PyPI's
``kernels`` (a dependency of sglang/transformers), even when Python runs from the repository root, where the working
directory comes first on sys.path; and the installed package is the checkout's, not a copy."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("cwd", [ROOT, "/"])
def test_pypi_kernels_wins_from_any_cwd(cwd):
    code = (
        "import kernels, sgl_spec.kernels.quantize_pages.ref as q, os;"
        "print(os.path.dirname(kernels.__file__)); print(os.path.dirname(q.__file__));"
        "print(callable(getattr(kernels, 'get_kernel', None)))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, check=True)
    pypi_dir, ours_dir, has_get_kernel = out.stdout.split()
    assert "site-packages" in pypi_dir and has_get_kernel == "True"  # PyPI's kernels, as transformers imports it
    assert os.path.realpath(ours_dir) == os.path.join(ROOT, "sgl_spec", "kernels", "quantize_pages")
