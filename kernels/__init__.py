"""Triton kernels (one op per file) and their pure-torch twins (``*_ref.py``); installed as ``sgl_spec.kernels``.

This folder sits at the top of the repository, so Python started *from the repository root* (``python -m
sglang.launch_server …`` puts the working directory first on ``sys.path``) would find it as a top-level ``kernels``
package and shadow PyPI's ``kernels``, which transformers and sglang import. When that happens we hand the import over
to the real package instead of breaking the user's server.
"""
if __name__ == "kernels":  # imported as top-level "kernels": redirect to the installed PyPI package
    import importlib
    import os
    import sys

    _here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    _saved = sys.path[:]
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.getcwd()) != _here]
    del sys.modules["kernels"]
    try:
        sys.modules["kernels"] = importlib.import_module("kernels")
    finally:
        sys.path[:] = _saved
