"""A stand-in for SGLang's KVCacheConfigurator (sglang.srt.mem_cache.kv_cache_configurator), for the memory-accounting
hooks of sgl_spec/plugin.py: the fields the tests give, plus the attention-parallel widths where the installed
release keeps them.

The widths live where the real configurator's fields say: a configurator with a ``ps`` field (0.5.17's
ParallelState) carries both widths there; one without it keeps ``attn_dp_size`` as its own field and reads
``attn_tp_size`` from the process's parallel context (``sglang.srt.runtime_context.get_parallel()``), which is
published here for the ``with`` block only, so no width outlives the test that states it.
"""
import contextlib
import dataclasses
from types import SimpleNamespace

from sglang.srt.mem_cache.kv_cache_configurator import KVCacheConfigurator


@contextlib.contextmanager
def kv_configurator(*, attn_tp_size: int, attn_dp_size: int, **fields):
    names = {f.name for f in dataclasses.fields(KVCacheConfigurator)}
    if "ps" in names:
        yield SimpleNamespace(ps=SimpleNamespace(attn_tp_size=attn_tp_size, attn_dp_size=attn_dp_size), **fields)
        return
    from sglang.srt.runtime_context import get_parallel

    with get_parallel().override(attn_tp_size=attn_tp_size, attn_dp_size=attn_dp_size):
        yield SimpleNamespace(attn_dp_size=attn_dp_size, **fields)
