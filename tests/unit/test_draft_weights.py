"""sgl_spec/speculative/draft_weights.py: which linears get a 4-bit copy, the swap inside ``int4`` (re-entrant, the
checkpoint's weights outside it, a quantized checkpoint's linears untouched), and the auto rule."""
import types

import torch

from sgl_spec.kernels import w4a16_linear as w4
from sgl_spec.speculative import draft_weights as dw


class UnquantizedLinearMethod:  # the name draft_weights checks, as SGLang's class has it
    def apply(self, layer, x, bias=None):
        return torch.nn.functional.linear(x, layer.weight, bias)


class Fp8LinearMethod(UnquantizedLinearMethod):
    pass


class Linear(torch.nn.Module):
    """SGLang's LinearBase calling convention: forward -> quant_method.apply(self, x, bias)."""

    def __init__(self, n, k, method=UnquantizedLinearMethod, seed=0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.weight = torch.nn.Parameter(torch.randn(n, k, generator=g) * 0.05, requires_grad=False)
        self.quant_method = method()

    def forward(self, x):
        return self.quant_method.apply(self, x, None)


def tiny_model(hidden=128, inter=256, layers=2, quantized_down=False):
    def layer(i):
        attn = types.SimpleNamespace(qkv_proj=Linear(3 * hidden, hidden, seed=4 * i),
                                     o_proj=Linear(hidden, hidden, seed=4 * i + 1))
        mlp = types.SimpleNamespace(gate_up_proj=Linear(2 * inter, hidden, seed=4 * i + 2),
                                    down_proj=Linear(hidden, inter, Fp8LinearMethod if quantized_down else
                                                     UnquantizedLinearMethod, seed=4 * i + 3),
                                    dual_gemm=types.SimpleNamespace(mode="UNQUANT"))
        return types.SimpleNamespace(self_attn=attn, mlp=mlp)
    return types.SimpleNamespace(model=types.SimpleNamespace(layers=[layer(i) for i in range(layers)]))


def test_prepare_copies_every_draft_read_linear_and_int4_swaps_them():
    m = tiny_model()
    made = dw.prepare(m, "cpu")
    assert made.engine == "torch" and len(made.linears) == 8 and not made.skipped
    lin = m.model.layers[1].mlp.down_proj
    x = torch.randn(3, 256)
    plain = lin(x)
    assert torch.equal(plain, x @ lin.weight.t())
    want = x @ w4.dequantize(dw.copy_of(lin).qweight, dw.copy_of(lin).scales, torch.float32).t()
    with dw.int4(m) as on:
        assert on
        assert torch.allclose(lin(x), want, atol=1e-6)
        assert m.model.layers[0].mlp.dual_gemm.mode is None  # the fused dual GEMM would read the bf16 gate_up
        with dw.int4(m):  # re-entrant
            assert torch.allclose(lin(x), want, atol=1e-6)
        assert torch.allclose(lin(x), want, atol=1e-6)  # the inner exit keeps the outer swap
    assert torch.equal(lin(x), plain) and m.model.layers[0].mlp.dual_gemm.mode == "UNQUANT"
    assert not torch.equal(want, plain)  # the copy really is another weight


def test_a_quantized_checkpoint_drafts_with_its_own_weights():
    m = tiny_model(quantized_down=True)
    made = dw.prepare(m, "cpu")
    assert len(made.linears) == 6 and [n for n, _ in made.skipped] == ["layers.0.mlp.down_proj",
                                                                         "layers.1.mlp.down_proj"]
    lin = m.model.layers[0].mlp.down_proj
    x = torch.randn(2, 256)
    with dw.int4(m):
        assert isinstance(lin.quant_method, Fp8LinearMethod) and torch.equal(lin(x), x @ lin.weight.t())


def test_shapes_the_gemm_does_not_take_keep_the_checkpoint():
    m = tiny_model(hidden=96, inter=256)  # K = 96 is not a multiple of 128
    made = dw.prepare(m, "cpu")
    assert {n.split(".")[-1] for n in (x.split(".", 2)[-1] for x, _ in made.skipped)} == {
        "qkv_proj", "o_proj", "gate_up_proj"}
    assert all("group size" in why for _, why in made.skipped)


def test_resolve():
    m = tiny_model()
    assert dw.resolve("model", m, "cpu") == (False, "--quantspec-draft-weights model")
    on, why = dw.resolve("int4", m, "cpu")
    assert on and "pure-torch" in why
    on, why = dw.resolve("auto", m, "cpu")
    assert not on and "no 4-bit GEMM" in why
    assert dw.linear_bytes(m) == sum(p.weight.nbytes for p in
                                     (lin for _, lin in dw._linears(m)))
