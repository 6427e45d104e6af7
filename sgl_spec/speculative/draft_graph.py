"""CUDA graphs for quantspec's draft passes (DECODE forwards inside ``backend.draft_mode``).

SGLang captures its decode graphs for TARGET_VERIFY (γ+1 tokens per request) under speculation, and a draft step's
``spec_info`` declares width 1, so SGLang refuses to replay them for drafts (worker.py, ``QuantSpecDraftStep``). A
draft pass of a small model is mostly launch overhead, so drafts get graphs of their own:

* ``DraftGraphRunner`` is SGLang's ``DecodeCudaGraphRunner`` at width 1 in DECODE mode, captured for SGLang's own
  decode batch sizes, **inside** ``backend.draft_mode`` over ``DraftStatics``: fixed-address copies of the draft
  tensors (``window_start [B]``, and for sparse drafts ``page_ids [L, B, KCAP]`` (``[L, B, Hkv, KCAP]`` with per-kv-head
  tables) / ``num_pages [L, B]``). The
  backend computes its metadata inside the graph from SGLang's static input buffers and these, so a replay reads
  whatever was copied into them. ``load_batch`` copies the worker's live draft tensors (the backend's
  ``draft_state``) after SGLang filled its buffers; padded rows get ``window_start 0`` / ``num_pages 0`` (with
  SGLang's padding: slot 0, position 0, so they read one hot token of the trash slot and no page).
* It uses SGLang's graph backend (the process-wide graph memory pool, shared with the verify graphs; captured after
  them) and its logits processor runs inside the graph (sampling stays outside, in the worker).
* Step 1 of a round replays through SGLang's forward path (``load_batch`` fills every buffer and the statics); steps
  2 … γ call ``DraftGraphRunner.replay_next``: copy the new token and its position into the graph's buffers and
  replay, the only inputs that change within a round (the backend reads neither ``seq_lens`` nor ``out_cache_loc``).
* ``routed(runner, model_runner)`` puts it in place of the verify runner for the worker's draft loop, so a round's
  first draft forward keeps SGLang's whole forward path (``ModelRunner.forward``) and falls back to eager, for the
  whole round, where ``can_run_graph`` says no (batch larger than the largest captured size, a dense/sparse mismatch, not drafting).
  It restores SGLang's WAR-barrier event afterwards: a draft replay publishes one (DECODE), but the verify and the
  acceptance still run after it, and whether the scheduler may prepare the next batch before they finish is the
  worker's decision for the whole round (sgl_spec/speculative/war_release.py: its own event, or none = the whole forward).

No graphs when SGLang captured none (``--disable-cuda-graph``, CPU, …). ``SGL_SPEC_DRAFT_GRAPHS`` (debugging only):
``off`` = eager drafts; ``eager`` = build the runner on any device (CPU too) and "replay" by calling the captured
forward function again under the static buffers (``_EagerReplay``): the same buffers, padding and routing as a real
graph, without ``torch.cuda.CUDAGraph``.
"""
from __future__ import annotations

import contextlib
import logging
import time
from typing import Optional

import torch

from sglang.srt.model_executor.forward_batch_info import CaptureHiddenMode, ForwardMode
from sglang.srt.model_executor.forward_context import ForwardContext, forward_context, has_forward_context
from sglang.srt.model_executor.runner.decode_cuda_graph_runner import DecodeCudaGraphRunner
from sglang.srt.model_executor.runner_backend.base_cuda_graph_backend import BaseCudaGraphBackend

from sgl_spec import knobs
from sgl_spec.patches import sglang
from sgl_spec.speculative import draft_layers, draft_weights
from sgl_spec.speculative.spec_info import QuantSpecDraftStep

logger = logging.getLogger(__name__)

ENV = knobs.name("DRAFT_GRAPHS")  # debugging: "off" | "eager"; unset = CUDA graphs wherever SGLang captures its own


class DraftStatics:
    """Fixed-address draft tensors a captured draft graph reads (``backend.draft_mode`` keeps them by reference)."""

    def __init__(self, max_bs: int, num_layers: int, kcap: Optional[int], device, heads: Optional[int] = None):
        self.window_start = torch.zeros((max_bs,), dtype=torch.int64, device=device)
        self.dense = kcap is None
        self.kcap = kcap
        # per-kv-head tables (--quantspec-draft-pages topk-head): [L, max_bs, Hkv, KCAP]
        shape = (num_layers, max_bs, kcap) if heads is None else (num_layers, max_bs, heads, kcap)
        self.page_ids = None if self.dense else torch.zeros(shape, dtype=torch.int32, device=device)
        self.num_pages = None if self.dense else torch.zeros((num_layers, max_bs), dtype=torch.int32, device=device)
        self.loads = 0  # copies made (tests read it)
        self._loaded = None  # (draft block, raw_bs, bs) the buffers hold

    def views(self, bs: int):
        """(window_start, page_ids, num_pages) of the first ``bs`` rows: what a graph of size ``bs`` was captured on."""
        if self.dense:
            return self.window_start[:bs], None, None
        return self.window_start[:bs], self.page_ids[:, :bs], self.num_pages[:, :bs]

    def scope(self, backend, bs: int):
        return backend.draft_mode(*self.views(bs))

    def matches(self, draft) -> bool:
        """Whether a live draft (``backend.draft_state``) has the layout these buffers were captured with."""
        if draft is None or (draft.page_ids is None) != self.dense:
            return False
        if self.dense:
            return True
        got, want = draft.page_ids.shape, self.page_ids.shape
        return len(got) == len(want) and got[0] == want[0] and tuple(got[2:]) == tuple(want[2:])

    def load(self, draft, raw_bs: int, bs: int) -> None:
        """Copy the live draft tensors into rows ``:raw_bs``; rows ``raw_bs:bs`` (padding) read nothing. Once per
        round: a draft block's tensors (``backend.draft_mode``, one per round) do not change between its γ steps, so
        a later step of the same block and padding copies nothing (5 eager launches a step less)."""
        if self._loaded is not None and self._loaded[0] is draft and self._loaded[1:] == (raw_bs, bs):
            return
        self._loaded = (draft, raw_bs, bs)  # a reference, not an id: the block cannot be freed and its id reused
        self.loads += 1
        self.window_start[:raw_bs].copy_(draft.window_start)
        self.window_start[raw_bs:bs].zero_()
        if not self.dense:
            self.page_ids[:, :raw_bs].copy_(draft.page_ids)
            self.num_pages[:, :raw_bs].copy_(draft.num_pages)
            self.num_pages[:, raw_bs:bs].zero_()


class _EagerReplay(BaseCudaGraphBackend):
    """Debugging stand-in for SGLang's graph backend (``SGL_SPEC_DRAFT_GRAPHS=eager``): capture keeps the forward
    function, replay calls it again inside the static draft scope of its size, exactly the inputs a graph replay
    reads (SGLang's static buffers and ``DraftStatics``), so the buffer filling/padding is checked on any device."""

    def __init__(self, scope_fn, attn_backend):
        self._fns = {}
        self._scope_fn = scope_fn
        self._attn_backend = attn_backend

    @contextlib.contextmanager
    def capture_session(self, stream):
        yield

    def capture_one(self, shape_key, forward_fn, capture_inputs=None, post_warmup_hook=None):
        forward_fn()  # the warmup run a graph backend does, so both paths see the same state afterwards
        if post_warmup_hook is not None:
            post_warmup_hook()
        self._fns[shape_key] = forward_fn

    def can_run(self, forward_batch, shape_key) -> bool:
        return shape_key in self._fns

    @contextlib.contextmanager
    def replay_session(self):
        yield

    def replay(self, shape_key, static_forward_batch, **kwargs):
        # A real graph replay needs no Python state; calling the forward does: SGLang's forward context (which
        # ModelRunner opens around its own replays, but not around DraftGraphRunner.replay_next's).
        with self._scope_fn(shape_key.size), self._context():
            return self._fns[shape_key]()

    def _context(self):
        if has_forward_context():
            return contextlib.nullcontext()
        return forward_context(ForwardContext(attn_backend=self._attn_backend))

    def cleanup(self) -> None:
        self._fns.clear()


class _UncapturedDevice:
    """The torch device module (``torch.cpu``) of an eager replay off CUDA, as SGLang's decode graph runner asks it
    about a capture: no stream is ever being captured (``is_current_stream_capturing``: False, which torch.cpu does
    not answer itself); everything else is the device module's own."""

    def __init__(self, module):
        self._module = module

    def __getattr__(self, name):
        return getattr(self._module, name)

    @staticmethod
    def is_current_stream_capturing() -> bool:
        return False


@contextlib.contextmanager
def _current_streams_of(device_module):
    """SGLang's graph-capture context (``parallel_state.graph_capture``) on ``device_module``'s streams: the context
    orders the capture stream after the current stream of torch's default accelerator
    (``get_current_device_stream_fast``: ``torch.get_device_module()``), which is CUDA in any CUDA build of torch,
    also where the server runs on the CPU and no GPU is present."""
    from sglang.srt.distributed import parallel_state

    saved = parallel_state.get_current_device_stream_fast
    parallel_state.get_current_device_stream_fast = device_module.current_stream
    try:
        yield
    finally:
        parallel_state.get_current_device_stream_fast = saved


class DraftGraphRunner(DecodeCudaGraphRunner):
    """SGLang's decode graph runner at width 1 in DECODE mode, captured inside the backend's draft mode."""

    def __init__(self, model_runner, statics_kcap: Optional[int], eager_replay: bool = False,
                 statics_heads: Optional[int] = None, fused_layers: bool = False):
        self._eager_replay = eager_replay
        self._fused_layers = fused_layers
        self._int4 = draft_weights.has_copy(getattr(model_runner, "model", None))  # graphs record the 4-bit draft weights' GEMMs
        self.fused_sizes: list = []  # captured batch sizes whose graphs run fused layers (draft_layers.py)
        self._statics_kcap = statics_kcap
        self._statics_heads = statics_heads
        self.statics: Optional[DraftStatics] = None
        self.replays = 0  # draft forwards served by a graph (tests and logs read it)
        self._logged_sizes: set = set()
        self._logged_next = False
        # speculative_num_draft_tokens=1 makes SGLang size the buffers and check widths for one token per request.
        super().__init__(model_runner, speculative_num_draft_tokens=1)

    # SGLang's __init__ allocates its buffers, resolves the graph backend, then calls capture().
    def capture(self) -> None:
        if self.captured_req_width != 1 or self.ragged_verify_mode:
            raise RuntimeError(f"quantspec draft graphs need width 1, got {self.captured_req_width}")
        # Under speculation SGLang would capture TARGET_VERIFY; drafts are DECODE forwards.
        self.capture_forward_mode = ForwardMode.DECODE
        self.capture_hidden_mode = CaptureHiddenMode.NULL
        pool = self.model_runner.token_to_kv_pool
        self.statics = DraftStatics(self.max_bs, pool.layer_num, self._statics_kcap, self.device,
                                    self._statics_heads)
        if self._eager_replay:
            self.backend = _EagerReplay(lambda bs: self.statics.scope(self.attn_backend, bs), self.attn_backend)
        if torch.device(self.device).type == "cuda":
            super().capture()
            return
        # Off CUDA only an eager replay is built (``capture`` below): SGLang's capture machinery on the device's own
        # module and streams.
        self.device_module = _UncapturedDevice(self.device_module)
        with _current_streams_of(self.device_module):
            super().capture()

    def capture_one_shape(self, size, forward, *args, **kwargs):
        # the rest of SGLang's arguments (stream, variant label; 0.5.23 adds the attention variant) pass through
        if self._fused_layers and size <= draft_layers.FUSED_MAX_BS:
            forward = draft_layers.fused_call(self.model_runner.model, forward)
            self.fused_sizes.append(size)
        if self._int4:
            forward = draft_weights.int4_call(self.model_runner.model, forward)
        with self.statics.scope(self.attn_backend, size):
            return super().capture_one_shape(size, forward, *args, **kwargs)

    def get_spec_info(self, num_tokens: int):
        return QuantSpecDraftStep()  # what the eager draft forward carries

    def can_run_graph(self, forward_batch) -> bool:
        be = self.attn_backend
        if not forward_batch.forward_mode.is_decode() or not self.statics.matches(be.draft_state):
            return False
        return super().can_run_graph(forward_batch)

    def replay_next(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Draft step i >= 1 of a round whose step 0 this runner just replayed: the next-token logits [raw_bs, V].

        Within a round only the token and its position change between draft steps: the batch rows, the captured
        size, the draft statics (page lists, window start) and SGLang's other buffers stay what step 0's
        ``load_batch`` put there, and the backend derives all its metadata inside the graph from ``positions``,
        ``req_pool_indices`` and the statics (it reads neither ``seq_lens`` nor ``out_cache_loc``; draft K/V go to
        the ring by position). So two copies and a replay replace SGLang's whole forward path (a ForwardBatch, the
        graph checks, ~10 buffer copies), which cost ~230-400 µs of host time a step against a 340-470 µs GPU pass
        on pycode-30m (``SGL_SPEC_TIMING``): this way the host does not pace the drafts."""
        n = self.raw_num_token
        if input_ids.shape[0] != n or positions.shape[0] != n:
            raise RuntimeError(f"quantspec draft replay: {input_ids.shape[0]} tokens for a step-0 batch of {n}")
        self.buffers.input_ids[:n].copy_(input_ids)
        self.buffers.positions[:n].copy_(positions)
        with self.backend.replay_session():
            out = self.backend.replay(self._replay_graph_key, None)
        self.replays += 1
        if not self._logged_next:
            self._logged_next = True
            logger.info("quantspec: draft steps after the first of a round replay their graph directly")
        return out.next_token_logits[:n]

    def load_batch(self, forward_batch, pp_proxy_tensors=None):
        super().load_batch(forward_batch, pp_proxy_tensors)
        self.statics.load(self.attn_backend.draft_state, self.raw_bs, self.bs)
        self.replays += 1
        if self.bs not in self._logged_sizes:  # once per captured size: shows the graphs are in use
            self._logged_sizes.add(self.bs)
            logger.info("quantspec: draft pass replayed from a CUDA graph (captured bs=%d, batch %d)",
                        self.bs, self.raw_bs)


def _mode() -> str:
    mode = knobs.get("DRAFT_GRAPHS", "on").lower()
    if mode not in ("on", "off", "eager"):
        raise ValueError(f"{ENV} must be on, off or eager (debugging), got {mode!r}")
    return mode


def capture(model_runner, pages, fused_layers: bool = False) -> Optional[DraftGraphRunner]:
    """Capture the draft graphs for the draft page policy ``pages`` (sgl_spec/pages/policies.py), or return None when
    drafts stay eager: SGLang captured no decode graphs, or the backend has no draft mode. ``fused_layers``
    (--quantspec-fused-draft, already resolved against the model by draft_layers.resolve): graphs of batch sizes up
    to draft_layers.FUSED_MAX_BS run fused decoder layers."""
    mode = _mode()
    backend = model_runner.attn_backend
    if mode == "off" or pages is None or not hasattr(backend, "draft_mode"):
        return None
    eager = mode == "eager"
    if not eager and not (model_runner.device == "cuda"
                          and isinstance(model_runner.decode_cuda_graph_runner, DecodeCudaGraphRunner)):
        logger.info("quantspec: draft passes run eagerly (SGLang captured no decode CUDA graphs)")
        return None
    kcap = None if pages.dense else pages.kcap
    if model_runner.graph_shared_output is None:  # eager replay where SGLang captured nothing: own logits rows
        from sglang.srt.model_executor.graph_shared_output import GraphSharedOutput
        from sglang.srt.model_executor.runner import get_batch_sizes_to_capture

        rows = max(get_batch_sizes_to_capture(model_runner, 1)[0])
        model_runner.graph_shared_output = GraphSharedOutput(device=model_runner.device, max_rows=rows)
    before = _free_gb(model_runner)
    tic = time.perf_counter()
    heads = None if pages.dense else getattr(pages, "heads", None)
    runner = DraftGraphRunner(model_runner, kcap, eager_replay=eager, statics_heads=heads,
                              fused_layers=bool(fused_layers))
    mem = before - _free_gb(model_runner)
    logger.info("quantspec: captured draft %s for bs=%s (%s drafts; fused layers at bs=%s) in %.2f s, %.3f GB",
                "forwards (eager replay, debugging)" if eager else "CUDA graphs", runner.capture_bs,
                "dense" if kcap is None else f"sparse, KCAP={kcap}" + (f" per kv head ({heads})" if heads else ""),
                sorted(runner.fused_sizes) or "none", time.perf_counter() - tic, mem)
    runner.memory_usage_gb = mem
    return runner


def _free_gb(model_runner) -> float:
    if model_runner.device != "cuda":
        return 0.0
    from sglang.srt.utils import get_available_gpu_memory

    return get_available_gpu_memory(model_runner.device, model_runner.gpu_id, empty_cache=False)


@contextlib.contextmanager
def routed(runner: Optional[DraftGraphRunner], model_runner):
    """Draft forwards inside this block go through ``runner`` (graph or its eager fallback)."""
    if runner is None:
        yield
        return
    saved_runner = model_runner.decode_cuda_graph_runner
    event = sglang().READ_DONE_EVENT
    saved_event = getattr(model_runner, event)
    model_runner.decode_cuda_graph_runner = runner
    try:
        yield
    finally:
        model_runner.decode_cuda_graph_runner = saved_runner
        # The verify and the acceptance still follow (the page selection after the verify reads req_to_token): the
        # read-done event a draft replay published must not stand for the round. SGLang's TARGET_VERIFY replay
        # publishes none, so after this the round's event is the worker's alone (war_release.publish), or none: the
        # scheduler then waits for the whole forward stream.
        setattr(model_runner, event, saved_event)
