"""SGLang 0.5.23: ``ServerArgs`` is a msgspec Struct, resolved once by ``ServerArgs.resolve_once``.

Flags: the record takes only its own fields, and a patched ``__init__`` never runs (a Struct has none), so the flags
are taken out of the argparse namespace around ``from_cli_args``, and out of ``Engine(**kwargs)`` by the builder
the Engine makes its record with. During resolution the record is sealed:
a setting is declared with ``declare_resolution`` and read through the resolving view; after resolution the
record keeps the user's input and ``resolution_result`` gives the value in effect. A custom algorithm's
``handle_server_args`` / ``validate_server_args`` receive a stand-in that records field writes only, so quantspec
validates and stores its config from the hook after ``handle_speculative_decoding``, on the record itself.
Underscore attributes that are not fields (``_quantspec``, ``_quantspec_flags``) are bookkeeping: writable at any
time and pickled with the record into every scheduler process.
"""
from __future__ import annotations

from sgl_spec.patches import take_flags

NAME = "0.5.23"
# the overlap scheduler's write-after-read barrier ("shared read" in 0.5.23): the runner whose forward publishes the
# read-done event, and the model-runner attribute that carries it (sgl_spec/speculative/war_release.py)
READ_DONE_RUNNER = "last_shared_read_runner"
READ_DONE_EVENT = "shared_read_done_event"
_SOURCE = "quantspec"  # the source name of quantspec's declarations
_SA = "sglang.srt.server_args.ServerArgs"


def server_args_hooks(backend_name: str) -> list:
    """(target, function, kind) for HookRegistry: how the flags reach the record. ``Engine(**kwargs)`` builds its
    record through the class attribute ``Engine.server_args_class`` right after loading the plugins, so that one
    is replaced here (a record type cannot take a patched ``__init__``) by a builder that takes the flags out."""
    import sys

    from sglang.srt.plugins.hook_registry import HookType

    engine = sys.modules.get("sglang.srt.entrypoints.engine")  # imported whenever an Engine is being built
    if engine is not None and not getattr(engine.Engine.server_args_class, "quantspec_flags", False):
        record_class = engine.Engine.server_args_class

        def build(**kwargs):
            flags = take_flags(kwargs, backend_name)
            record = record_class(**kwargs)
            record._quantspec_flags = flags
            return record

        build.quantspec_flags = True
        engine.Engine.server_args_class = staticmethod(build)

    def from_cli_args(original, cls, args):
        flags = take_flags(vars(args), backend_name)
        record = original(cls, args)
        record._quantspec_flags = flags
        return record

    return [(f"{_SA}.from_cli_args", from_cli_args, HookType.AROUND)]


def is_record(server_args) -> bool:
    """Whether ``server_args`` is the record itself (not the stand-in a custom algorithm's callbacks get)."""
    from sglang.srt.arg_groups.arg_utils import is_record as record

    return record(server_args)


def set_private(server_args, name: str, value) -> None:
    """A non-field attribute that is pickled with the record into every scheduler process."""
    setattr(server_args, name, value)


def view(server_args):
    """The settings as resolved so far (a live view: declarations over the user's input)."""
    from sglang.srt.arg_groups.model_override_base import resolving_view

    return resolving_view(server_args)


def declare(server_args, **fields) -> None:
    from sglang.srt.arg_groups.overrides import declare_resolution

    declare_resolution(server_args, _SOURCE, **fields)


assign = declare  # every setting is declared in 0.5.23, the speculative group's too


def model_config(server_args):
    from sglang.srt.arg_groups.model_override_base import model_config_of

    return model_config_of(server_args)


def disable_prefill_cuda_graph(server_args) -> bool:
    """Turn the prefill CUDA graph off; False when the user chose a prefill graph backend explicitly."""
    from sglang.srt.model_executor.cuda_graph_config import Backend, Phase, with_phase

    cgc = view(server_args).cuda_graph_config
    if cgc is None or not hasattr(cgc, "prefill"):
        return True
    user_set = (Phase.PREFILL, "backend") in getattr(server_args, "_cuda_graph_config_locked", set())
    if user_set and cgc.prefill.backend != Backend.DISABLED:
        return False
    declare(server_args, cuda_graph_config=with_phase(cgc, Phase.PREFILL, backend=Backend.DISABLED))
    return True


def resolved(server_args, name: str):
    """A setting's resolved value once resolution is over (a plain object, e.g. a unit test's: its attribute)."""
    from sglang.srt.arg_groups.overrides import resolution_result

    if not is_record(server_args):
        return getattr(server_args, name)
    return resolution_result(server_args, name)


def attn_tp_size(kvc) -> int:
    """Attention tensor-parallel width seen by a KVCacheConfigurator (the process's parallel context)."""
    from sglang.srt.runtime_context import get_parallel

    return get_parallel().attn_tp_size


def attn_dp_size(kvc) -> int:
    return kvc.attn_dp_size


# Why the release's decoder layers cannot take the fused draft forward (sgl_spec/speculative/draft_layers.py): they
# keep the residual in ``forward_batch.residual_stream`` behind layer boundaries instead of passing it in and out,
# which the fused forward does not implement, so drafts run SGLang's own layers.
FUSED_DRAFT_LAYERS_UNSUPPORTED = ("sglang 0.5.23's decoder layers keep the residual in a residual stream (fused draft "
                                  "layers: 0.5.17)")


def spec_logprobs(batch, logits_output, predict, accept_index) -> None:
    """SGLang's logprobs of a verify's accepted tokens (``accept_index`` [bs, γ+1], -1 past the accepted ones)."""
    from sglang.srt.layers.logprob_processor import compute_spec_logprobs

    compute_spec_logprobs(batch, logits_output, predict, accept_index=accept_index)


def flash_attention():
    """SGLang's FlashAttention-3 (``flash_attn_with_kvcache``, ``flash_attn_varlen_func``: sglang.kernels' loader,
    sgl-kernel's build or the kernels-community one) and sgl_kernel's ``merge_state_v2``, as its FA3 backend imports
    them (the prefill's FA3 engine, extend_attention/fa3.py)."""
    from types import SimpleNamespace

    from sgl_kernel import merge_state_v2
    from sglang.kernels.ops.attention.flash_attention import flash_attn_varlen_func, flash_attn_with_kvcache

    return SimpleNamespace(flash_attn_with_kvcache=flash_attn_with_kvcache,
                           flash_attn_varlen_func=flash_attn_varlen_func, merge_state_v2=merge_state_v2)
