"""What differs between the SGLang releases sgl-spec supports: one module per SGLang target.

``sglang_0_5_17`` and ``sglang_0_5_23`` expose the same functions (how quantspec's flags reach the server args, how
a setting is declared during SGLang's argument resolution, how a value is read back, and the runtime calls whose
signatures moved); ``sglang()`` returns the one for the installed SGLang, so the rest of the package never checks a
version. Any other SGLang stops the server at startup with one line naming the supported releases.
``cpu_paged_allocator`` is the one patch every release needs (page-aligned slots on CPU without Triton).
"""
from __future__ import annotations

import functools

SUPPORTED = ("0.5.17", "0.5.23")


def take_flags(mapping: dict, backend_name: str) -> dict:
    """Pop quantspec's flags (and ``attention_backend=quantspec``) out of a record's argument mapping: the keywords
    of ``Engine(...)`` / ``ServerArgs(...)`` or the argparse namespace."""
    from sgl_spec.flags import FLAGS

    flags = {k: mapping.pop(k) for k in FLAGS if k in mapping}
    if mapping.get("attention_backend") == backend_name:
        # The field keeps SGLang's own choice (auto-detected from None): SGLang decides host-side helpers (e.g.
        # Triton vs torch index kernels) from that string; the model's attention itself is quantspec's.
        mapping["attention_backend"] = None
        flags["attention_backend"] = True
    return flags


def installed_version() -> str:
    """The installed SGLang's version, from its distribution metadata (importing sglang is not needed)."""
    from importlib.metadata import version

    return version("sglang")


@functools.lru_cache(maxsize=None)
def sglang():
    """The adapter module of the installed SGLang release."""
    version = installed_version()
    if version == "0.5.17":
        from sgl_spec.patches import sglang_0_5_17 as adapter
    elif version == "0.5.23":
        from sgl_spec.patches import sglang_0_5_23 as adapter
    else:
        raise RuntimeError(f"sgl-spec supports sglang {' and '.join(SUPPORTED)}, found sglang {version}: "
                           f"pip install 'sglang=={SUPPORTED[-1]}'")
    return adapter
