"""sgl_spec/speculative/draft_layers.py without a server: which models get fused draft layers (and the reason when not), the
folded weights, the forward swap and its restore, the signature a wrapped forward keeps, and the fused layer's math
against an unfused reference built from the same modules (the server path: test_draft_graph_server.py)."""
import inspect

import pytest
import torch
import torch.nn.functional as F

from sgl_spec.patches import sglang
from sgl_spec.speculative import draft_layers


class UnquantizedLinearMethod:
    pass


class _Linear(torch.nn.Module):
    def __init__(self, n, k, bias=False):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(n, k) / k ** 0.5, requires_grad=False)
        self.bias = torch.nn.Parameter(torch.randn(n), requires_grad=False) if bias else None
        self.quant_method = UnquantizedLinearMethod()
        self.tp_size = 1

    def forward(self, x):
        return F.linear(x, self.weight, self.bias), None


class RMSNorm(torch.nn.Module):
    def __init__(self, k):
        super().__init__()
        self.weight = torch.nn.Parameter(1 + 0.1 * torch.randn(k), requires_grad=False)
        self.variance_epsilon = 1e-6
        self.has_weight, self.cast_x_before_out_mul, self.fp32_residual = True, False, False
        self.override_orig_dtype = self.variance_size_override = None

    def forward(self, x, residual=None):  # SGLang's forward_native
        r = x.float() if residual is None else x.float() + residual.float()
        out = (r * torch.rsqrt(r.pow(2).mean(-1, keepdim=True) + self.variance_epsilon) * self.weight).to(x.dtype)
        return out if residual is None else (out, r.to(x.dtype))


class SiluAndMul(torch.nn.Module):
    def forward(self, x):
        i = x.shape[-1] // 2
        return (F.silu(x[:, :i].float()) * x[:, i:].float()).to(x.dtype)


class RotaryEmbedding(torch.nn.Module):
    """SGLang's RotaryEmbedding as the fused layers see it: NeoX halves, a [positions, head_dim] cos | sin cache."""

    def __init__(self, d, max_pos=64):
        super().__init__()
        self.head_size = self.rotary_dim = d
        self.is_neox_style = True
        ang = torch.arange(max_pos)[:, None] * (10000.0 ** (-torch.arange(d // 2) / (d // 2)))[None, :]
        self.cos_sin_cache = torch.cat([ang.cos(), ang.sin()], 1)

    def forward_native(self, positions, q, k):
        cs = self.cos_sin_cache[positions]
        c, s = cs[:, None, : self.head_size // 2], cs[:, None, self.head_size // 2:]

        def rot(t):
            t = t.reshape(t.shape[0], -1, self.head_size)
            a, b = t[..., : self.head_size // 2], t[..., self.head_size // 2:]
            return torch.cat([a * c - b * s, b * c + a * s], -1).flatten(1)
        return rot(q), rot(k)

    forward_cuda = forward = forward_native


class _Attn(torch.nn.Module):
    def __init__(self, hidden, heads, kv_heads, d):
        super().__init__()
        self.head_dim = d
        self.q_size, self.kv_size = heads * d, kv_heads * d
        self.qkv_proj = _Linear(self.q_size + 2 * self.kv_size, hidden)
        self.o_proj = _Linear(hidden, self.q_size)
        self.rotary_emb = RotaryEmbedding(d)
        self.attn = lambda q, k, v, fb: q[:, : self.q_size] + v.repeat(1, self.q_size // self.kv_size) + k.sum(-1,
                                                                                                          True)


class _MLP(torch.nn.Module):
    def __init__(self, hidden, inter):
        super().__init__()
        self.gate_up_proj, self.down_proj, self.act_fn = _Linear(2 * inter, hidden), _Linear(hidden, inter), SiluAndMul()


class LlamaDecoderLayer(torch.nn.Module):
    def __init__(self, hidden=32, inter=48):
        super().__init__()
        self.self_attn, self.mlp = _Attn(hidden, 4, 2, 16), _MLP(hidden, inter)
        self.input_layernorm, self.post_attention_layernorm = RMSNorm(hidden), RMSNorm(hidden)

    def forward(self, positions, hidden_states, forward_batch, residual):  # SGLang's LlamaDecoderLayer.forward
        if residual is None:
            residual = hidden_states
            hidden_states = self.input_layernorm(hidden_states)
        else:
            hidden_states, residual = self.input_layernorm(hidden_states, residual)
        a = self.self_attn
        q, k, v = a.qkv_proj(hidden_states)[0].split([a.q_size, a.kv_size, a.kv_size], dim=-1)
        q, k = a.rotary_emb(positions, q, k)
        hidden_states = a.o_proj(a.attn(q, k, v, forward_batch))[0]
        hidden_states, residual = self.post_attention_layernorm(hidden_states, residual)
        m = self.mlp
        return m.down_proj(m.act_fn(m.gate_up_proj(hidden_states)[0]))[0], residual


class _Model(torch.nn.Module):
    def __init__(self, n=2):
        super().__init__()
        self.model = torch.nn.Module()
        self.model.layers = torch.nn.ModuleList([LlamaDecoderLayer() for _ in range(n)])


@pytest.fixture
def residual_passing_release(monkeypatch):
    """The per-layer checks as they run on a release whose decoder layers pass the residual in and out (0.5.17's
    LlamaDecoderLayer, which the stand-ins above mirror): such a release names no reason of its own. A release that
    does name one answers with it before looking at any layer (test_the_releases_reason_comes_first)."""
    monkeypatch.setattr(sglang(), "FUSED_DRAFT_LAYERS_UNSUPPORTED", None)


def test_the_releases_reason_comes_first(monkeypatch):
    assert draft_layers.unsupported(_Model()) == sglang().FUSED_DRAFT_LAYERS_UNSUPPORTED  # the installed release's
    monkeypatch.setattr(sglang(), "FUSED_DRAFT_LAYERS_UNSUPPORTED", "the release's layers keep the residual")
    m = _Model()
    m.model.layers[1].mlp.gate_up_proj.quant_method = object()
    assert draft_layers.unsupported(m) == "the release's layers keep the residual"
    ok = _Model()
    assert draft_layers.resolve(ok, requested=True) is False
    assert all(getattr(layer, "_quantspec_prescaled", None) is None for layer in ok.model.layers)


def test_supported_and_reasons(residual_passing_release):
    torch.manual_seed(0)
    assert draft_layers.unsupported(_Model()) is None
    m = _Model()
    m.model.layers[1].mlp.gate_up_proj.quant_method = object()
    assert draft_layers.unsupported(m) == "layer 1: gate_up_proj is quantized"
    m = _Model()
    m.model.layers[0].self_attn.qkv_proj.tp_size = 2
    assert draft_layers.unsupported(m) == "layer 0: qkv_proj is tensor-parallel"
    m = _Model()
    m.model.layers[0].post_attention_layernorm.cast_x_before_out_mul = True
    assert "post_attention_layernorm is not a plain RMSNorm" in draft_layers.unsupported(m)
    m = _Model()
    m.model.layers[0].mlp.act_fn = torch.nn.GELU()
    assert "activation is not SiluAndMul" in draft_layers.unsupported(m)
    m = _Model()
    m.model.layers[1].self_attn.qkv_proj.bias = torch.nn.Parameter(torch.zeros(128), requires_grad=False)
    assert draft_layers.unsupported(m) == "layer 1: qkv_proj has a bias"
    m = _Model()
    m.model.layers[0].self_attn.rotary_emb.is_neox_style = False
    assert "not NeoX-style" in draft_layers.unsupported(m)
    m = _Model()
    m.model.layers[0].self_attn.rotary_emb.rotary_dim = 8
    assert "whole head dim" in draft_layers.unsupported(m)
    m = _Model()
    m.model.layers[0].self_attn.rotary_emb.__class__ = type("MRotaryEmbedding", (RotaryEmbedding,),
                                                              {"forward_native": lambda self, p, q, k: (q, k)})
    assert "MRotaryEmbedding, which rotates its own way" in draft_layers.unsupported(m)
    m = _Model()
    m.model.layers[1].__class__ = type("Qwen3DecoderLayer", (LlamaDecoderLayer,), {})
    assert "layer 1 is Qwen3DecoderLayer" in draft_layers.unsupported(m)
    assert draft_layers.resolve(_Model(), requested=False) is False
    ok = _Model()
    assert draft_layers.resolve(ok, requested=True) is True
    assert all(getattr(layer, "_quantspec_prescaled", None) is not None for layer in ok.model.layers)
    assert draft_layers.resolve(m, requested=True) is False


def test_folded_weight_budget(monkeypatch, residual_passing_release):
    # 2 layers x (128 + 96) rows x 32 columns x 4 bytes = 57344 bytes of folded copies
    monkeypatch.setattr(draft_layers, "MAX_PRESCALED_BYTES", 57343)
    assert "folded qkv / gate_up copies would take" in draft_layers.unsupported(_Model())
    monkeypatch.setattr(draft_layers, "MAX_PRESCALED_BYTES", 57344)
    assert draft_layers.unsupported(_Model()) is None


def test_prescaled_weights_fold_the_norm_weights_once():
    layer = _Model(n=1).model.layers[0]
    qkv, gu = draft_layers.prescaled(layer)
    assert torch.equal(qkv, layer.self_attn.qkv_proj.weight * layer.input_layernorm.weight)
    assert torch.equal(gu, layer.mlp.gate_up_proj.weight * layer.post_attention_layernorm.weight)
    assert draft_layers.prescaled(layer)[0] is qkv  # built once
    assert "_quantspec_prescaled" not in dict(layer.named_parameters()) | dict(layer.named_buffers())


def test_fused_layers_match_the_unfused_layers_and_are_restored():
    torch.manual_seed(1)
    model = _Model(n=3)
    pos, x = torch.tensor([0, 7, 3, 63, 12]), torch.randn(5, 32)

    def run():
        h, r = x, None
        for layer in model.model.layers:
            h, r = layer(pos, h, None, r)
        return h, r
    want = run()
    with draft_layers.fused(model) as on:
        assert on and all("forward" in layer.__dict__ for layer in model.model.layers)
        got = run()
    assert all("forward" not in layer.__dict__ for layer in model.model.layers)  # class forward again
    # fp32: the norm weight folded into the weights (one fp32 rounding of W g) and the summation orders differ
    assert torch.allclose(got[0], want[0], rtol=1e-4, atol=1e-4) and torch.allclose(got[1], want[1], rtol=1e-4,
                                                                                       atol=1e-4)
    with draft_layers.fused(model, enabled=False) as on:
        assert not on and all("forward" not in layer.__dict__ for layer in model.model.layers)


def test_fused_call_keeps_the_signature_and_fuses_each_call():
    model = _Model(n=1)
    seen = []

    def forward(input_ids, positions, forward_batch, pp_proxy_tensors=None):
        seen.append("forward" in model.model.layers[0].__dict__)
        return input_ids

    call = draft_layers.fused_call(model, forward)
    assert "pp_proxy_tensors" in inspect.signature(call).parameters  # SGLang inspects the captured forward
    assert call(1, 2, 3) == 1 and call(4, 5, 6) == 4
    assert seen == [True, True] and "forward" not in model.model.layers[0].__dict__


def test_fused_is_reentrant():
    """A graph capture's fused_call inside the worker's fused block: leaving the inner block keeps the outer swap."""
    model = _Model(n=2)
    with draft_layers.fused(model):
        outer = [layer.__dict__["forward"] for layer in model.model.layers]
        with draft_layers.fused(model):
            pass
        assert [layer.__dict__.get("forward") for layer in model.model.layers] == outer
    assert all("forward" not in layer.__dict__ for layer in model.model.layers)
