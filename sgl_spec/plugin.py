"""SGLang plugin entry point (``[project.entry-points."sglang.srt.plugins"] quantspec``): wires quantspec into SGLang.

``load_plugins()`` runs ``register()`` in every SGLang process (launcher, engine, schedulers) and then applies the
hooks; ``register()`` is idempotent so a second call (tests, a manual call) changes nothing. What it hooks
(all by ``sglang.srt.plugins.hook_registry.HookRegistry``, no SGLang file is edited):

command line / server args (sgl_spec/config.py)
  * ``ServerArgs.add_cli_args`` (AFTER): ``--spec-algo`` alias of ``--speculative-algorithm``, ``--quantspec-*`` flags
    (sgl_spec/flags.py); ``quantspec`` is added to the ``--attention-backend`` choices and described in its help.
  * the installed SGLang's adapter (sgl_spec/patches/): our flags are not ServerArgs fields, so they are taken out
    of the command line / ``Engine(...)`` keywords and stashed on the record before SGLang resolves it;
    ``attention_backend="quantspec"`` becomes "SGLang's default backend + quantspec INT8 mode".
  * ``arg_groups.speculative_hook.handle_speculative_decoding`` (AFTER), and the registered spec algorithm's
    ``validate_server_args`` / ``handle_server_args``: ``config.configure`` validates and adjusts the settings.
KV pool (sgl_spec/kvcache/pool.py)
  * ``DefaultPoolConfigurator._compute_cell_size`` (AROUND): bytes per token of the quantized pages.
  * ``KVCacheConfigurator._profile_available_bytes`` (AFTER): minus the hot rings, the page-score buffer and the
    4-bit draft weights, which are built there (sgl_spec/speculative/draft_weights.py).
  * ``KVCacheConfigurator._build_token_to_kv_pool`` (AROUND): ``QuantSpecKVPool`` instead of ``MHATokenToKVPool``.
attention (sgl_spec/kvcache/backend.py)
  * ``attention_backend_setup._build_resolved_backend`` (AROUND): ``QuantSpecAttnBackend`` for the target model;
    SGLang's resolved backend name stays in ``server_args`` for its host-side helpers. ``quantspec`` is also in
    SGLang's attention-backend registry.
CPU (sgl_spec/patches/cpu_paged_allocator.py)
  * ``KVCacheConfigurator._build_token_to_kv_pool_allocator`` (AROUND): page-aligned slot allocation without Triton.
metrics (sgl_spec/speculative/spec_metrics.py)
  * ``SchedulerMetricsReporter.update_spec_metrics`` (AFTER): accept length / rate in the stats and gauges every round.
  * ``SchedulerLoadInquirer.get_loads`` (AFTER): /v1/loads' speculative block from the lifetime counts.
speculative algorithm
  * ``SpeculativeAlgorithm.register("QUANTSPEC", ...)``: worker ``sgl_spec.speculative.worker.QuantSpecWorker`` (imported lazily).
"""
from __future__ import annotations

import logging

from sgl_spec.config import ALGO_NAME, BACKEND_NAME, configure, get_config
from sgl_spec.flags import add_cli_args
from sgl_spec.patches import sglang
from sgl_spec.speculative import spec_metrics

logger = logging.getLogger(__name__)

_REGISTERED = False

_SA = "sglang.srt.server_args.ServerArgs"
_KVC = "sglang.srt.mem_cache.kv_cache_configurator.KVCacheConfigurator"


def register() -> None:
    global _REGISTERED
    if _REGISTERED:
        return
    _REGISTERED = True
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    adapter = sglang()  # an unsupported SGLang stops here, with the supported releases named
    hooks = [
        (f"{_SA}.add_cli_args", _add_cli_args, HookType.AFTER),
        *adapter.server_args_hooks(BACKEND_NAME),
        ("sglang.srt.arg_groups.speculative_hook.handle_speculative_decoding", _after_speculative, HookType.AFTER),
        ("sglang.srt.model_executor.pool_configurator.DefaultPoolConfigurator._compute_cell_size", _cell_size,
         HookType.AROUND),
        (f"{_KVC}._profile_available_bytes", _available_bytes, HookType.AFTER),
        (f"{_KVC}._build_token_to_kv_pool", _build_pool, HookType.AROUND),
        ("sglang.srt.model_executor.model_runner_components.attention_backend_setup._build_resolved_backend",
         _build_backend, HookType.AROUND),
        # the live penalizer state for exact penalties in a speculative window (sgl_spec/speculative/penalties.py)
        ("sglang.srt.sampling.sampling_batch_info.SamplingBatchInfo.copy_for_forward", _stash_penalizers,
         HookType.AFTER),
        # SGLang's speculative metrics, current after every round
        (spec_metrics.ROUND_TARGET, spec_metrics.on_round, HookType.AFTER),
        (spec_metrics.LOADS_TARGET, spec_metrics.on_loads, HookType.AFTER),
    ]
    for target, fn, kind in hooks:
        HookRegistry.register(target, fn, kind)
    from sgl_spec.patches import cpu_paged_allocator

    cpu_paged_allocator.apply()
    _register_spec_algorithm()
    _register_attention_backend()


# ---- server args ------------------------------------------------------------------------------------------------------
def _add_cli_args(result, parser):
    add_cli_args(parser)


def _stash_penalizers(result, info, *args, **kwargs):
    from sgl_spec.speculative import penalties

    return penalties.stash_orchestrator(result, info, *args, **kwargs)


def _after_speculative(result, server_args, *args, **kwargs):
    configure(server_args)


# ---- KV pool ----------------------------------------------------------------------------------------------------------
def _format(kvc):
    from sgl_spec.kvcache.format import KVFormat

    cfg = get_config(kvc.server_args)
    heads = kvc.model_config.get_num_kv_heads(sglang().attn_tp_size(kvc))
    return KVFormat(cfg.page_size, heads, kvc.model_config.head_dim)


def _on(kvc) -> bool:
    return get_config(kvc.server_args) is not None and not kvc.is_draft_worker


def _cell_size(original, self, kvc, num_layers, *args, **kwargs):
    if not _on(kvc):
        return original(self, kvc, num_layers, *args, **kwargs)
    from sgl_spec.kvcache.pool import cell_size_bytes

    return cell_size_bytes(_format(kvc), num_layers)


def _available_bytes(result, kvc, *args, **kwargs):
    if not _on(kvc):
        return result
    from sgl_spec.kvcache.pool import ring_bytes, score_bytes

    cfg, fmt = get_config(kvc.server_args), _format(kvc)
    layers = kvc.layer_info.num_effective_layers
    slots = sglang().resolved(kvc.server_args, "max_running_requests") // max(1, sglang().attn_dp_size(kvc)) + 1
    fixed = ring_bytes(fmt, layers, slots, kvc.model_dtype)
    if cfg.needs_page_scores:
        fixed += score_bytes(fmt, layers, slots, kvc.model_config.context_len)
    if cfg.needs_page_scores and cfg.draft_pages == "topk-last":  # the backend keeps the verify queries
        heads = kvc.model_config.num_attention_heads // sglang().attn_tp_size(kvc)
        fixed += layers * slots * cfg.num_verify_tokens * heads * fmt.head_dim * kvc.model_dtype.itemsize
    if fixed >= result:
        raise ValueError(f"quantspec: the hot rings of {slots - 1} request slots need {fixed / 2**30:.2f} GB, more "
                         f"than the {result / 2**30:.2f} GB left for the KV cache; lower --max-running-requests")
    logger.info("quantspec: %.3f GB of the KV budget go to hot rings (+ page scores) for %d request slots",
                fixed / 2**30, slots - 1)
    return result - fixed - _draft_weight_bytes(cfg, kvc, result - fixed)


def _draft_weight_bytes(cfg, kvc, budget: int) -> int:
    """The 4-bit draft weights (sgl_spec/speculative/draft_weights.py), built here - the model is loaded and the
    KV pool not yet sized - so their bytes come out of the KV budget; returns those bytes."""
    from sgl_spec.speculative import draft_weights

    model = getattr(kvc, "model", None)  # SGLang's configurator holds the loaded model
    if not cfg.speculative or model is None:
        return 0
    copy, why = draft_weights.resolve(cfg.draft_weights, model, kvc.device)
    if not copy:
        logger.info("quantspec: draft passes read the checkpoint's weights (%s)", why)
        return 0
    made = draft_weights.prepare(model, kvc.device)
    if made.nbytes >= budget:
        raise ValueError(f"quantspec: the 4-bit draft weights need {made.nbytes / 2**30:.2f} GB, more than the "
                         f"{budget / 2**30:.2f} GB left for the KV cache; use --quantspec-draft-weights model")
    logger.info("quantspec: %.3f GB of the KV budget go to the 4-bit draft weights (%s)", made.nbytes / 2**30, why)
    return made.nbytes


def _build_pool(original, self, *args, sizes, req_to_token_pool, **kwargs):
    if not _on(self):
        return original(self, *args, sizes=sizes, req_to_token_pool=req_to_token_pool, **kwargs)
    from sglang.srt.runtime_context import get_exec

    from sgl_spec.kvcache.pool import QuantSpecKVPool

    fmt = _format(self)
    return QuantSpecKVPool(
        sizes.max_total_num_tokens,
        page_size=self.pool_page_size,
        dtype=self.kv_cache_dtype,
        head_num=fmt.num_kv_heads,
        head_dim=fmt.head_dim,
        layer_num=self.layer_info.num_effective_layers,
        device=self.device,
        enable_memory_saver=get_exec().features.enable_memory_saver,
        num_slots=req_to_token_pool.req_to_token.shape[0],
        start_layer=self.layer_info.start_layer,
        end_layer=self.layer_info.end_layer,
    )


# ---- attention backend ------------------------------------------------------------------------------------------------
def _build_backend(original, *args, model_runner, resolved, **kwargs):
    cfg = get_config(model_runner.server_args)
    if cfg is None or model_runner.is_draft_worker:
        return original(*args, model_runner=model_runner, resolved=resolved, **kwargs)
    from sgl_spec.kvcache.backend import QuantSpecAttnBackend

    return QuantSpecAttnBackend(model_runner, resolved.decode, cfg)


def _create_quantspec_backend(runner):
    cfg = get_config(runner.server_args)
    if cfg is None:
        raise ValueError(f"the {BACKEND_NAME} attention backend needs quantspec's KV pool: start SGLang with "
                         f"--attention-backend {BACKEND_NAME} or --speculative-algorithm {ALGO_NAME}")
    from sgl_spec.kvcache.backend import QuantSpecAttnBackend

    return QuantSpecAttnBackend(runner, runner.server_args.attention_backend, cfg)


def _register_attention_backend() -> None:
    from sglang.srt.layers.attention.attention_registry import ATTENTION_BACKENDS, register_attention_backend
    from sglang.srt.server_args import ATTENTION_BACKEND_CHOICES, add_attention_backend_choices

    if BACKEND_NAME not in ATTENTION_BACKENDS:
        register_attention_backend(BACKEND_NAME)(_create_quantspec_backend)
    if BACKEND_NAME not in ATTENTION_BACKEND_CHOICES:
        add_attention_backend_choices([BACKEND_NAME])


# ---- speculative algorithm --------------------------------------------------------------------------------------------
def _register_spec_algorithm() -> None:
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm
    from sglang.srt.speculative.spec_registry import CustomSpecAlgo, get_spec

    if get_spec(ALGO_NAME) is not None:
        return

    class QuantSpecAlgo(CustomSpecAlgo):
        """Methods the scheduler calls on SpeculativeAlgorithm that CustomSpecAlgo (0.5.17) lacks, + our args hook."""

        def carries_draft_hidden_states(self) -> bool:
            return False  # the draft is the target model itself: no hidden states travel between the two

        def need_topk(self) -> bool:
            return False  # one draft chain, no EAGLE tree

        def create_future_map(self, device, req_to_token_pool, needs_cpu_seq_lens=True,
                              needs_confidence_relay=False):
            from sglang.srt.managers.overlap_utils import FutureMap

            return FutureMap(device, self, req_to_token_pool, needs_cpu_seq_lens, needs_confidence_relay)

        def handle_server_args(self, server_args) -> None:
            configure(server_args)

    def worker_factory(server_args):
        from sgl_spec.speculative.worker import QuantSpecWorker

        return QuantSpecWorker

    SpeculativeAlgorithm.register(
        ALGO_NAME, supports_overlap=True, spec_class=QuantSpecAlgo, validate_server_args=configure
    )(worker_factory)
