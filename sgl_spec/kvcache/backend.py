"""quantspec's attention backend: writes the hot ring, quantizes completed pages, attends under the view.

Per forward and layer (docs/CONTRACTS.md, "The attention view" and "Backend ⇄ worker"):

* write the new tokens' K/V into the hot ring ``hot[slot, (pos//P) % R, pos % P]`` (slot = ``req_pool_idx``);
* quantize every page this forward completes (its last token is among the new ones) into the page store, straight
  from the new K/V (prefill) or from the ring (a page whose first tokens came from an earlier forward);
* attend: EXTEND - pure torch (prefill_ref.py); DECODE - ``verify_attention`` with NQ = 1; TARGET_VERIFY -
  ``verify_attention`` with NQ = γ+1 (+ per-layer page scores for the next sparse draft); DECODE inside
  ``draft_mode(...)`` - ``draft_decode`` over the draft page list (upper plane only) + hot tokens, no quantization.

Everything is derived from the forward batch (req_pool_indices, positions, seq_lens / extend lens, req_to_token);
the page table is ``req_to_token[r, ::P] // P``. DECODE / TARGET_VERIFY metadata is built with device ops of static
shape only (no ``.item()``), in ``init_forward_metadata_in_graph`` so CUDA graphs can capture it; pages that do not
complete are quantized into page 0 (SGLang's padding page, never read) instead of branching on the host.
"""
from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from typing import Optional

import torch

from sgl_spec import knobs
from sgl_spec.kernels.draft_decode import draft_decode
from sgl_spec.kernels.engine import prefill_engine
from sgl_spec.kernels.engine import verify_launch_gluon as _verify_launch_gluon
from sgl_spec.kernels.quantize_pages import quantize_pages
from sgl_spec.kernels.ring_write import ring_write
from sgl_spec.kernels.verify_attention import verify_attention
from sgl_spec.kernels.window_meta import window_meta
from sgl_spec.config import HOT_RING_PAGES as R
from sgl_spec.config import QuantSpecConfig
from sgl_spec.kernels.window_meta.ref import ring_rows
from sgl_spec.kernels.extend_attention import (ExtendPlan, PagedPlan, SegmentPlan, extend_attention, extend_plan,
                                               paged_plan, segment_plan, spans)
from sgl_spec.kernels.extend_attention import fa3 as extend_fa3
from sgl_spec.kernels.extend_attention import fa3_segments as extend_fa3_segments
from sgl_spec.kvcache.prefill import extend_attention as extend_one
from sgl_spec.patches import sglang

logger = logging.getLogger(__name__)


def _attention_backend_base():
    from sglang.srt.layers.attention.base_attn_backend import AttentionBackend

    return AttentionBackend


@dataclass
class _Tokens:
    """Where this forward's new tokens go in the ring, and which pages they complete."""

    w_row: torch.Tensor  # [T] int64 flat ring row (slot * R + (pos // P) % R) * P + pos % P; slot 0 = trash
    q_rows: Optional[torch.Tensor]  # [n] int64: first row of each completed page in the quantize source (None: drafts)
    q_pages: Optional[torch.Tensor]  # [n] int32: its physical page id


@dataclass
class _Decode:  # DECODE and TARGET_VERIFY: device tensors, static shapes
    tokens: _Tokens
    slots: torch.Tensor  # [B] int32 req_pool_idx
    q_start: torch.Tensor  # [B] int32 position of each request's first query row
    page_table: Optional[torch.Tensor]  # [B, MAXP] int32 (None in sparse drafts)
    nq: int
    # draft forwards only (None otherwise): the hot range and the dense page count, the same for every layer
    hot_start: Optional[torch.Tensor] = None  # [B] int32 first ring position the draft reads
    hot_len: Optional[torch.Tensor] = None  # [B] int32 ring tokens up to and including the query's own
    dense_pages: Optional[torch.Tensor] = None  # [B] int32 complete pages before the ring (dense drafts)


@dataclass
class _Extend:  # EXTEND / MIXED: host-driven
    tokens: _Tokens
    slots: torch.Tensor  # [B] req_pool_idx (device)
    page_table: torch.Tensor  # [B, MAXP] int32
    starts: list  # per request: first new position (= prefix length)
    lens: list  # per request: number of new tokens
    row0: list  # per request: first row in q/k/v
    straddle: list  # (request, page) whose first tokens came from an earlier forward and that this forward completes
    ring: torch.Tensor  # [B] long: the ring page of each request's first new position
    plan: Optional[ExtendPlan] = None  # the Triton engine's batch layout (prefill_engine "triton")
    paged: Optional[PagedPlan] = None  # the FA3 engine's (prefill_engine "fa3")
    segments: Optional[SegmentPlan] = None  # the one-call FA3 engine's (prefill_engine "fa3_segments")


def _with_straddles(new: torch.Tensor, ring: torch.Tensor, md: _Extend, P: int) -> torch.Tensor:
    """The rows an EXTEND's completed pages are quantized from: the new rows, then one [ring part | new part] page per
    page that began before its request's start (``ring``: each request's start page as the ring held it). The slices
    are built only for those pages, so a batch without one adds no host work a layer."""
    sides = [torch.cat([ring[b, :md.starts[b] % P], new[md.row0[b]: md.row0[b] + (j + 1) * P - md.starts[b]]])
             for b, j in md.straddle]
    return torch.cat([new] + [t.to(new.dtype) for t in sides]) if sides else new


@dataclass
class _Draft:  # set by the worker through draft_mode()
    window_start: torch.Tensor  # [B] first position of the round (kept by reference: a captured graph reads it)
    page_ids: Optional[torch.Tensor]  # [L, B, KCAP] int32 physical ids, or None = dense
    num_pages: Optional[torch.Tensor]  # [L, B] int32


class QuantSpecAttnBackend(_attention_backend_base()):
    # Decode/verify metadata is built on the device from seq_lens alone, so SGLang's overlap scheduler need not copy
    # the published lengths to the host before each round (which would serialize the rounds: war_release.py).
    needs_cpu_seq_lens = False

    def __init__(self, model_runner, resolved_name: str, cfg: QuantSpecConfig):
        super().__init__()
        from sgl_spec.kvcache.pool import QuantSpecKVPool

        knobs.warn_set(logger)  # the INT8-only and the speculative server both build this backend at startup

        self.device = model_runner.device
        self.req_to_token_pool = model_runner.req_to_token_pool
        self.token_to_kv_pool = model_runner.token_to_kv_pool
        if not isinstance(self.token_to_kv_pool, QuantSpecKVPool):
            raise RuntimeError(f"the quantspec attention backend needs the quantspec KV pool, got "
                               f"{type(self.token_to_kv_pool).__name__}")
        self.cfg = cfg
        self.P = cfg.page_size
        self.resolved_name = resolved_name  # what SGLang resolved; decides host-side helpers (support_triton)
        self.forward_metadata = None
        self._draft: Optional[_Draft] = None
        pool = self.token_to_kv_pool
        rtt = self.req_to_token_pool.req_to_token
        self.max_pages = -(-rtt.shape[1] // self.P)
        # Per-layer page scores written by TARGET_VERIFY for the next round's top-k draft pages (sparse drafts only).
        self.page_scores: Optional[torch.Tensor] = None
        if cfg.needs_page_scores:
            self.page_scores = torch.zeros((pool.layer_num, rtt.shape[0], pool.head_num, self.max_pages),
                                           dtype=torch.float32, device=self.device)
        # --quantspec-draft-pages topk-last scores pages with each request's last accepted row, known only after the
        # verify: TARGET_VERIFY then keeps its queries [L, max_bs, γ+1, Hq, D] (by batch row, like page_scores) and
        # each layer's scale instead of scoring, and sgl_spec/experimental/topk_last.py scores that row afterwards.
        self.keep_verify_q = self.page_scores is not None and cfg.draft_pages == "topk-last"
        self.verify_q: Optional[torch.Tensor] = None
        self.verify_scale: dict = {}
        # --enable-deterministic-inference: SGLang makes its GEMMs batch-invariant; ours must not depend on the batch
        # either: verify_attention's split geometry then depends only on the page-table width (never on B or NQ; by
        # default it follows B, so a large batch reads each request's pages in a few long splits); the prefill's key
        # layout follows the chunking (which depends on what else is scheduled), so it gets a fixed one.
        sa = getattr(model_runner, "server_args", None)
        self.batch_invariant = bool(sa is not None and sglang().resolved(sa, "enable_deterministic_inference"))
        self.draft_engine = self._resolve_draft_engine(model_runner, pool)
        self.verify_engine = self._resolve_verify_engine(model_runner, pool)
        self._group = self._head_group(model_runner, pool) or 1
        self.prefill_engine = prefill_engine(self.device, self.batch_invariant)
        logger.info("quantspec prefill attention: %s", self.prefill_engine)

    def _head_group(self, model_runner, pool) -> int:
        mc = getattr(model_runner, "model_config", None)
        hq = getattr(mc, "num_attention_heads", None)
        tp = max(1, int(getattr(model_runner, "tp_size", 1) or 1))
        return (hq // tp) // pool.head_num if hq else 0

    def _resolve_verify_engine(self, model_runner, pool) -> str:
        """--quantspec-verify-kernel -> verify_attention's engine for the INT8 page splits, decided once here (INT8
        decode included; 'auto' without speculation too) by sgl_spec/kernels/engine.py ``select_engine``; each
        launch then takes it where its window and batch fit (``_verify_kw``)."""
        from sgl_spec.kernels.engine import select_engine

        want = self.cfg.verify_kernel if self.cfg.speculative else "auto"
        nq = max(1, self.cfg.num_draft_steps + 1) if self.cfg.speculative else 1
        ch = select_engine("verify", self.device, page_size=self.P, head_dim=pool.head_dim,
                           group=self._head_group(model_runner, pool), nq=nq, want=want,
                           batch_invariant=self.batch_invariant)
        self.verify_max_rows, self.verify_min_pairs = ch.max_rows, ch.min_pairs
        if want != "triton":
            logger.info("quantspec verify kernel: %s%s", ch.engine, f" ({ch.reason})" if ch.reason else (
                f" (from {ch.min_pairs} request x KV-head pairs a launch)" if want == "auto" and ch.min_pairs > 1
                else ""))
        return ch.engine

    def _verify_kw(self, nq: int, group: int, pairs: int) -> dict:
        """verify_attention's engine keyword for a launch of ``pairs`` (request, KV head) pairs, nq rows each (called
        every layer: no import or lookup beyond the attributes ``_resolve_verify_engine`` set)."""
        use = _verify_launch_gluon(self.verify_engine, nq, group, pairs, self.verify_max_rows, self.verify_min_pairs)
        return {"engine": "gluon"} if use else {}

    def _resolve_draft_engine(self, model_runner, pool) -> str:
        """--quantspec-draft-kernel -> draft_decode's engine, decided once here by sgl_spec/kernels/engine.py
        ``select_engine``: 'gluon' that cannot run fails at startup with the reason; 'auto' takes gluon where it
        runs."""
        from sgl_spec.kernels.engine import select_engine

        if not self.cfg.speculative or self.cfg.draft_kernel == "triton":
            return "triton"
        ch = select_engine("draft", self.device, page_size=self.P, head_dim=pool.head_dim,
                           group=self._head_group(model_runner, pool), want=self.cfg.draft_kernel)
        logger.info("quantspec draft kernel: %s%s", ch.engine, f" ({ch.reason})" if ch.reason else "")
        return ch.engine

    # ---- worker API (docs/CONTRACTS.md "Backend ⇄ worker") --------------------------------------------------------
    @contextlib.contextmanager
    def draft_mode(self, window_start: torch.Tensor, page_ids=None, num_pages=None):
        """DECODE forwards inside this block are draft passes. window_start [B]: each request's first position of
        the current round (its committed length); the draft reads the ring from ``(window_start//P)*P`` on and the
        upper plane of ``page_ids[l, b, :num_pages[l, b]]`` (default: every page before that, dense)."""
        if (page_ids is None) != (num_pages is None):
            raise ValueError("draft_mode(): give both page_ids and num_pages, or neither (dense)")
        prev = self._draft
        self._draft = _Draft(window_start, page_ids, num_pages)
        try:
            yield self
        finally:
            self._draft = prev

    @property
    def is_drafting(self) -> bool:
        return self._draft is not None

    @property
    def draft_state(self) -> Optional[_Draft]:
        """The open draft block's tensors (None outside one): the draft CUDA graphs copy them into their own."""
        return self._draft

    # ---- SGLang backend interface ---------------------------------------------------------------------------------
    def support_triton(self):
        from sglang.srt.utils.common import support_triton

        return support_triton(self.resolved_name)

    def init_cuda_graph_state(self, max_bs: int, max_num_tokens: int):
        pass  # metadata is recomputed inside the graph from the runner's static forward-batch buffers

    def get_cuda_graph_seq_len_fill_value(self):
        return 1

    def init_forward_metadata(self, forward_batch):
        self.init_forward_metadata_out_graph(forward_batch)
        self.init_forward_metadata_in_graph(forward_batch)

    def init_forward_metadata_out_graph(self, forward_batch, in_capture: bool = False):
        mode = forward_batch.forward_mode
        if mode.is_extend() and not mode.is_target_verify():
            self.forward_metadata = self._extend_metadata(forward_batch)

    def init_forward_metadata_in_graph(self, forward_batch):
        mode = forward_batch.forward_mode
        if mode.is_decode() or mode.is_target_verify():
            self.forward_metadata = self._decode_metadata(forward_batch)
        elif not mode.is_extend() and not mode.is_idle():
            raise NotImplementedError(f"quantspec attention does not handle forward mode {mode.name}")

    # ---- metadata ---------------------------------------------------------------------------------------------------
    def page_table(self, req_pool_indices):
        """[B, MAXP] int32 physical page id of every logical page (entries past a request's pages are garbage)."""
        rtt = self.req_to_token_pool.req_to_token
        return torch.div(rtt[:, :: self.P][req_pool_indices.long()], self.P, rounding_mode="floor").to(torch.int32)

    def page_table_source(self):
        """(table, page_div) with ``page_table(r) == table[r] // page_div`` for every slot r, without a copy: the
        draft page policies hand it to select_topk_pages (rows by slot, token units), which saves three launches."""
        return self.req_to_token_pool.req_to_token[:, :: self.P], self.P

    def scores_view(self):
        """What the draft page policies read of this backend (sgl_spec/pages/view.py)."""
        from sgl_spec.pages.view import PageScores

        pool, slots = self.token_to_kv_pool, self.req_to_token_pool.req_to_token.shape[0]
        return PageScores(self.cfg, self.page_scores, pool.layer_num, slots, pool.head_num, self.max_pages,
                          self.device, self.page_table, self.page_table_source, pool=pool,
                          verify_queries=lambda: (self.verify_q, self.verify_scale),
                          batch_invariant=self.batch_invariant)

    def _decode_metadata(self, fb) -> _Decode:
        """One ``window_meta`` launch per forward (sgl_spec/kernels/window_meta/ref.py has the formulas): a draft pass runs γ
        times a round and is launch-bound on small models, and as torch ops it is ~16 launches per draft pass and ~30 per
        verify. Drafts never quantize (the verify rewrites their positions) and a sparse draft reads its own page
        lists: no page table, no completed page."""
        d = self._draft
        table = None if d is not None and d.page_ids is not None else self.req_to_token_pool.req_to_token
        m = window_meta(fb.positions, fb.req_pool_indices, self.P, R, req_to_token=table,
                            completions=d is None, window_start=None if d is None else d.window_start)
        B = fb.req_pool_indices.shape[0]
        nq = fb.positions.shape[0] // max(B, 1)
        tok = _Tokens(w_row=m.w_row, q_rows=m.q_rows, q_pages=m.q_pages)
        return _Decode(tok, m.slots, m.q_start, m.page_table, nq, hot_start=m.hot_start, hot_len=m.hot_len,
                       dense_pages=m.dense_pages)

    def _extend_metadata(self, fb) -> _Extend:
        P = self.P
        starts = fb.extend_prefix_lens_cpu
        lens = fb.extend_seq_lens_cpu
        if starts is None or lens is None:  # SGLang's gpu-only extend path leaves the host mirrors unset
            starts, lens = fb.extend_prefix_lens.tolist(), fb.extend_seq_lens.tolist()
        starts, lens = [int(x) for x in starts], [int(x) for x in lens]
        T = sum(lens)
        dev = fb.req_pool_indices.device
        slots = fb.req_pool_indices.long()
        page_table = self.page_table(slots)
        # pages whose last position lies in start … end-1 are quantized in this forward: from the new rows, or, for
        # a page that began before the request's start (at most one a request), from a small side buffer of
        # [ring part | new part] appended after the T new rows
        s_t, n_t = torch.tensor(starts, dtype=torch.long), torch.tensor(lens, dtype=torch.long)
        row0_t = torch.cumsum(n_t, 0) - n_t
        done = (s_t + n_t) // P - s_t // P
        pg_b, pg_j = spans(s_t // P, done)
        split = pg_j * P < s_t[pg_b]
        whole = ~split
        row0 = row0_t.tolist()
        straddle = list(zip(pg_b[split].tolist(), pg_j[split].tolist()))
        rows = torch.cat([(row0_t[pg_b] + pg_j * P - s_t[pg_b])[whole], T + P * torch.arange(len(straddle))])
        q_pages = page_table[torch.cat([pg_b[whole], pg_b[split]]).to(dev),
                             torch.cat([pg_j[whole], pg_j[split]]).to(dev)]
        # Ring: keep the last R pages of each request (later forwards read only those); the rest go to trash slot 0.
        pos = fb.positions.long()
        lens_t = n_t.to(dev, non_blocking=True)
        tok_slot = torch.repeat_interleave(slots, lens_t, output_size=T)
        tok_end = torch.repeat_interleave((s_t + n_t).to(dev, non_blocking=True), lens_t, output_size=T)
        keep = torch.div(pos, P, rounding_mode="floor") >= torch.div(tok_end - 1, P, rounding_mode="floor") - (R - 1)
        tok = _Tokens(
            w_row=ring_rows(torch.where(keep, tok_slot, torch.zeros_like(tok_slot)), pos, P, R),
            q_rows=rows.to(dev, non_blocking=True),
            q_pages=q_pages.to(torch.int32),
        )
        ring = ((s_t // P) % R).to(dev, non_blocking=True)
        plan = (extend_plan(starts, lens, self._group, P, dev, self.token_to_kv_pool.head_dim)
                if self.prefill_engine == "triton" else None)
        paged = paged_plan(starts, lens, page_table, P) if self.prefill_engine == "fa3" else None
        segments = segment_plan(starts, lens, page_table, P) if self.prefill_engine == "fa3_segments" else None
        return _Extend(tok, slots, page_table, starts, lens, row0, straddle, ring, plan, paged, segments)

    # ---- forward ----------------------------------------------------------------------------------------------------
    def _layer_state(self, layer):
        pool = self.token_to_kv_pool
        if layer.logit_cap and layer.logit_cap > 0 or (layer.sliding_window_size or -1) > -1:
            raise NotImplementedError("quantspec attention supports neither logit capping nor sliding windows")
        store = pool.page_store(layer.layer_id)
        hot_k, hot_v = pool.hot(layer.layer_id)
        return store, hot_k, hot_v

    def _write_ring(self, tok: _Tokens, hot_k, hot_v, k, v):
        ring_write(hot_k, hot_v, tok.w_row, k, v)

    def forward_extend(self, q, k, v, layer, forward_batch, save_kv_cache=True, **kwargs):
        if forward_batch.forward_mode.is_target_verify():
            return self._forward_window(q, k, v, layer, forward_batch)
        if k is None:
            raise NotImplementedError("quantspec attention needs the new tokens' K/V")
        md: _Extend = self.forward_metadata
        store, hot_k, hot_v = self._layer_state(layer)
        H, D = hot_k.shape[-2:]
        k, v = k.view(-1, H, D), v.view(-1, H, D)
        q3 = q.reshape(k.shape[0], -1, D)
        P = self.P
        # 1. each request's first page as the ring holds it, read before this forward's ring writes can overwrite it
        prev_k, prev_v = hot_k[md.slots, md.ring], hot_v[md.slots, md.ring]  # [B, P, H, D]
        # 2. ring, 3. completed pages (straddling ones from [earlier part | new part] side buffers)
        self._write_ring(md.tokens, hot_k, hot_v, k, v)
        if md.tokens.q_rows.numel():
            quantize_pages(_with_straddles(k, prev_k, md, P), _with_straddles(v, prev_v, md, P), md.tokens.q_rows,
                           md.tokens.q_pages, store)
        # 4. attention: the whole batch at once (FA3 or Triton engine), else one request at a time
        out = torch.empty_like(q3)
        if md.paged is not None:
            extend_fa3.extend_attention(q3, k, v, prev_k, prev_v, store, md.paged, layer.scaling, out=out)
            return out.view(q.shape[0], -1)
        if md.segments is not None:
            extend_fa3_segments.extend_attention(q3, k, v, prev_k, prev_v, store, md.segments, layer.scaling, out=out)
            return out.view(q.shape[0], -1)
        if md.plan is not None:
            extend_attention(q3, k, v, prev_k, prev_v, store, md.page_table, md.plan, layer.scaling, out=out)
            return out.view(q.shape[0], -1)
        for b, (s, n, r0) in enumerate(zip(md.starts, md.lens, md.row0)):
            extend_one(q3[r0:r0 + n], k[r0:r0 + n], v[r0:r0 + n], prev_k[b, :s % P], prev_v[b, :s % P], store,
                             md.page_table[b], s, layer.scaling, out=out[r0:r0 + n], page_aligned=self.batch_invariant)
        return out.view(q.shape[0], -1)

    def forward_decode(self, q, k, v, layer, forward_batch, save_kv_cache=True, **kwargs):
        return self._forward_window(q, k, v, layer, forward_batch)

    def _forward_window(self, q, k, v, layer, forward_batch):
        """DECODE (NQ = 1, or a draft step) and TARGET_VERIFY (NQ = γ+1)."""
        if k is None:
            raise NotImplementedError("quantspec attention needs the new tokens' K/V")
        md: _Decode = self.forward_metadata
        store, hot_k, hot_v = self._layer_state(layer)
        H, D = hot_k.shape[-2:]
        B, nq = md.slots.shape[0], md.nq
        k, v = k.view(-1, H, D), v.view(-1, H, D)
        q4 = q.reshape(B, nq, -1, D)
        if self._draft is not None:
            if nq != 1:
                raise RuntimeError("quantspec drafting runs one token per request per forward (DECODE)")
            # draft_decode writes the token's K/V into the ring itself (one launch a layer less)
            return self._draft_decode(q4[:, 0], layer, md, store, hot_k, hot_v, k, v).view(q.shape[0], -1)
        self._write_ring(md.tokens, hot_k, hot_v, k, v)
        quantize_pages(hot_k.view(-1, H, D), hot_v.view(-1, H, D), md.tokens.q_rows, md.tokens.q_pages, store)
        scores = None
        if self.page_scores is not None and forward_batch.forward_mode.is_target_verify():
            li = layer.layer_id - self.token_to_kv_pool.start_layer
            if self.keep_verify_q:
                self._keep_verify_q(li, q4, layer.scaling)
            else:
                scores = self.page_scores[li, :B]
        out = verify_attention(q4, store, md.page_table, md.q_start, hot_k, hot_v, md.slots, layer.scaling,
                                   scores=scores, score_kind=self.cfg.page_score, batch_invariant=self.batch_invariant,
                                   **self._verify_kw(q4.shape[1], q4.shape[2] // store.k_upper.shape[1],
                                                     q4.shape[0] * store.k_upper.shape[1]))
        return out.view(q.shape[0], -1)

    def _keep_verify_q(self, li: int, q4, scaling: float):
        if self.verify_q is None:  # sized on the first verify: SGLang's graph warmup runs it eagerly before capture
            L, slots = self.page_scores.shape[:2]
            self.verify_q = q4.new_zeros((L, slots) + tuple(q4.shape[1:]))
        self.verify_q[li, : q4.shape[0]] = q4
        self.verify_scale[li] = scaling

    def _draft_decode(self, q, layer, md: _Decode, store, hot_k, hot_v, new_k, new_v):
        d = self._draft
        if d.page_ids is None:  # dense: every complete page before the hot pages
            page_ids, num_pages = md.page_table, md.dense_pages
        else:
            li = layer.layer_id - self.token_to_kv_pool.start_layer
            page_ids, num_pages = d.page_ids[li], d.num_pages[li]
        return draft_decode(q, store, page_ids, num_pages, hot_k, hot_v, md.slots, md.hot_start, md.hot_len,
                                layer.scaling, new_k=new_k, new_v=new_v, engine=self.draft_engine)
