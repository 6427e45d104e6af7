"""SGLang 0.5.17: ``ServerArgs`` is a dataclass resolved inside ``__post_init__``.

Flags: our flags are not ServerArgs fields, so ``from_cli_args`` / ``__init__`` (AROUND) take them out of the
namespace / kwargs and stash them on the instance (``_quantspec_flags``) before ``__post_init__`` resolves it; the
spec algorithm's hooks and a hook after ``handle_speculative_decoding`` then run ``sgl_spec.config.configure`` on
the record itself. A resolvable setting is declared through SGLang's post-process stash (a plain assignment would
be overwritten when the stash is materialized at the end of ``__post_init__``); after resolution the fields hold
the resolved values.
"""
from __future__ import annotations

import contextvars

from sgl_spec.flags import FLAGS
from sgl_spec.patches import take_flags

NAME = "0.5.17"
# the overlap scheduler's write-after-read barrier: the runner whose forward publishes the read-done event, and the
# model-runner attribute that carries it (sgl_spec/speculative/war_release.py)
READ_DONE_RUNNER = "war_fastpath_runner"
READ_DONE_EVENT = "war_fastpath_read_done_event"
_SA = "sglang.srt.server_args.ServerArgs"
# quantspec flags parsed from the command line, on their way from ServerArgs.from_cli_args to ServerArgs.__init__.
_PENDING: contextvars.ContextVar = contextvars.ContextVar("quantspec_pending_flags", default=None)


def server_args_hooks(backend_name: str) -> list:
    """(target, function, kind) for HookRegistry: how the flags reach the record."""
    from sglang.srt.plugins.hook_registry import HookType

    def from_cli_args(original, cls, args):
        token = _PENDING.set({k: getattr(args, k) for k in FLAGS if hasattr(args, k)})
        try:
            return original(cls, args)
        finally:
            _PENDING.reset(token)

    def init(original, self, *args, **kwargs):
        flags = dict(_PENDING.get() or {})
        flags.update(take_flags(kwargs, backend_name))  # Engine(quantspec_topk_ratio=...) and friends
        object.__setattr__(self, "_quantspec_flags", flags)
        return original(self, *args, **kwargs)

    return [(f"{_SA}.from_cli_args", from_cli_args, HookType.AROUND), (f"{_SA}.__init__", init, HookType.AROUND)]


def is_record(server_args) -> bool:
    """Whether ``server_args`` is the record itself (0.5.17 hands every hook the record)."""
    return True


def set_private(server_args, name: str, value) -> None:
    """A non-field attribute that is pickled with the record into every scheduler process."""
    object.__setattr__(server_args, name, value)


def view(server_args):
    """The settings as resolved so far (declarations over the user's input)."""
    from sglang.srt.arg_groups.overrides import resolved_view

    return resolved_view(server_args)


def declare(server_args, **fields) -> None:
    from sglang.srt.arg_groups.overrides import run_post_process_pass

    def quantspec_settings(view):
        return dict(fields)

    run_post_process_pass(server_args, quantspec_settings)


def assign(server_args, **fields) -> None:
    """Settings of the speculative group, which 0.5.17 resolves by plain assignment."""
    for k, v in fields.items():
        setattr(server_args, k, v)


def model_config(server_args):
    return server_args.get_model_config()


def disable_prefill_cuda_graph(server_args) -> bool:
    """Turn the prefill CUDA graph off; False when the user chose a prefill graph backend explicitly."""
    from sglang.srt.model_executor.cuda_graph_config import Backend, Phase

    cgc = getattr(server_args, "cuda_graph_config", None)
    if cgc is None:
        return True
    user_set = (Phase.PREFILL, "backend") in getattr(server_args, "_cuda_graph_config_locked", set())
    if user_set and cgc.prefill.backend != Backend.DISABLED:
        return False
    cgc.prefill.backend = Backend.DISABLED
    return True


def resolved(server_args, name: str):
    """A setting's resolved value once resolution is over."""
    return getattr(server_args, name)


def attn_tp_size(kvc) -> int:
    """Attention tensor-parallel width seen by a KVCacheConfigurator."""
    return kvc.ps.attn_tp_size


def attn_dp_size(kvc) -> int:
    return kvc.ps.attn_dp_size


# Why the release's decoder layers cannot take the fused draft forward (sgl_spec/speculative/draft_layers.py); None:
# they can.
FUSED_DRAFT_LAYERS_UNSUPPORTED = None


def spec_logprobs(batch, logits_output, predict, accept_index) -> None:
    """SGLang's logprobs of a verify's accepted tokens (``accept_index`` [bs, γ+1], -1 past the accepted ones)."""
    from sglang.srt.layers.logprob_processor import compute_spec_v2_logprobs

    compute_spec_v2_logprobs(batch, logits_output, predict, accept_index, accept_index.shape[1] - 1)


def flash_attention():
    """SGLang's FlashAttention-3 (``flash_attn_with_kvcache``, ``flash_attn_varlen_func``) and ``merge_state_v2``,
    from sgl_kernel, as its FA3 backend imports them (the prefill's FA3 engine, extend_attention/fa3.py)."""
    from types import SimpleNamespace

    import sgl_kernel
    from sgl_kernel.flash_attn import flash_attn_varlen_func, flash_attn_with_kvcache

    return SimpleNamespace(flash_attn_with_kvcache=flash_attn_with_kvcache,
                           flash_attn_varlen_func=flash_attn_varlen_func, merge_state_v2=sgl_kernel.merge_state_v2)
