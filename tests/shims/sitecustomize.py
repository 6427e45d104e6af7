"""Test-only interpreter hook for SGLang server processes on CPU machines (the harness puts this directory on
PYTHONPATH, so every process of the server, including spawned schedulers, runs it at startup).

Why: the PyPI torchvision wheel is a CUDA build; on a CPU torch its C extension fails to load, and then
`torchvision/_meta_registrations.py` dies in `register_fake("torchvision::nms")` because the op schema was never
defined. transformers 5.x imports torchvision when SGLang registers image processors, so the server cannot start.
Defining the two schemas (nms, qnms: the only ops registered with register_fake rather than behind `_has_ops()`)
before torchvision is imported lets it import; the ops themselves raise if ever called.

Only done when torchvision's extension really fails to load, so a CPU-built torchvision is left alone.
"""
import torchvision_fix

torchvision_fix.install()
