"""Tiny random checkpoints for CPU server tests: small enough that SGLang loads and runs them on 2 cores in seconds,
real enough (a Hugging Face architecture SGLang serves + a real BPE tokenizer) that the whole serving path is
exercised. ``make_tiny_llama`` is LlamaForCausalLM; ``make_tiny_model`` also writes the other families users serve
(Qwen2: QKV bias; Qwen3: per-head q/k RMSNorm) and Llama-3's rope scaling, at any head count and head_dim.

The tokenizer is pycode-30m's (tests/assets/tokenizer, vocab 8192), copied into the repo so CI and users need
neither the hub nor ../shared. Weights are drawn from a seeded generator, so the same arguments always give the same
checkpoint (and the same greedy outputs).
"""
import shutil
from pathlib import Path

import torch

TOKENIZER_DIR = Path(__file__).resolve().parent.parent / "assets" / "tokenizer"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
VOCAB_SIZE = 8192  # must match tests/assets/tokenizer/tokenizer.json
EOS_TOKEN_ID = 0  # "<|endoftext|>" in that tokenizer


FAMILIES = ("llama", "qwen2", "qwen3")


def make_tiny_llama(out_dir, **kwargs) -> Path:
    """A random LlamaForCausalLM (``make_tiny_model`` with family "llama")."""
    return make_tiny_model(out_dir, family="llama", **kwargs)


def make_tiny_model(
    out_dir,
    *,
    family: str = "llama",
    rope_parameters: dict | None = None,
    dtype: str = "float32",
    num_layers: int = 2,
    hidden_size: int = 64,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    head_dim: int = 16,
    intermediate_size: int = 128,
    max_position_embeddings: int = 2048,
    seed: int = 0,
    init_std: float = 0.5,
) -> Path:
    """Write a random checkpoint of ``family`` (config.json, model.safetensors, tokenizer files) to out_dir; return it.

    family: "llama" (LlamaForCausalLM), "qwen2" (Qwen2ForCausalLM: biased q/k/v projections) or "qwen3"
    (Qwen3ForCausalLM: RMSNorm over each head's q and k before rope). rope_parameters: Hugging Face's rope dict
    (e.g. ``{"rope_type": "llama3", ...}``); default plain rope with theta 10000.

    dtype: "float32" (for exact comparisons against Hugging Face) or "bfloat16" (the serving dtype on GPUs).
    init_std: weight std. Larger than HF's 0.02 on purpose: with tiny-std weights every logit is ~equal and greedy
    decoding is decided by float noise, so SGLang and HF could disagree for reasons that are not bugs. A std of 0.5
    gives well-separated logits and varied (non-repeating) continuations.
    """
    import transformers

    if family not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES}, got {family!r}")
    prefix = {"llama": "Llama", "qwen2": "Qwen2", "qwen3": "Qwen3"}[family]
    config_cls = getattr(transformers, f"{prefix}Config")
    model_cls = getattr(transformers, f"{prefix}ForCausalLM")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    torch_dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[dtype]
    config = config_cls(
        vocab_size=VOCAB_SIZE,
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads,
        head_dim=head_dim,
        max_position_embeddings=max_position_embeddings,
        rms_norm_eps=1e-6,
        rope_parameters=rope_parameters or {"rope_type": "default", "rope_theta": 10000.0},
        tie_word_embeddings=False,
        bos_token_id=EOS_TOKEN_ID,
        eos_token_id=EOS_TOKEN_ID,
        pad_token_id=None,
    )
    # Seed the global RNG too: module constructors draw from it before we overwrite the weights.
    torch.manual_seed(seed)
    if family == "qwen2" and config.head_dim != hidden_size // num_heads:
        raise ValueError("SGLang's Qwen2 reads head_dim as hidden_size // num_heads: choose them so")
    model = model_cls(config)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in sorted(model.named_parameters()):
            if name.endswith("norm.weight"):  # also Qwen3's q_norm / k_norm
                # RMSNorm gains near 1 keep activations in range through the layers.
                param.copy_(1.0 + 0.1 * torch.randn(param.shape, generator=gen))
            else:
                # Scale by fan-in so deeper products stay O(1) whatever hidden_size is chosen.
                fan_in = param.shape[-1] if param.dim() > 1 else 1
                std = init_std if name.startswith("model.embed_tokens") else init_std * (64 / fan_in) ** 0.5 / 4
                param.copy_(std * torch.randn(param.shape, generator=gen))
    model = model.to(torch_dtype)
    model.config.dtype = dtype
    model.generation_config.eos_token_id = EOS_TOKEN_ID
    model.save_pretrained(out, safe_serialization=True)
    for name in TOKENIZER_FILES:
        shutil.copyfile(TOKENIZER_DIR / name, out / name)
    return out


if __name__ == "__main__":
    import sys

    print(make_tiny_llama(sys.argv[1] if len(sys.argv) > 1 else "/tmp/tiny-llama"))
