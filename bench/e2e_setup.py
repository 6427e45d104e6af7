"""What one end-to-end run measures on: the device's name, the model (real checkpoint, built-in dummy config or the
smoke test's tiny Llama) and the prompts of each (ctx, batch) cell: every server of a run gets the same ones."""
from __future__ import annotations

import sys
from pathlib import Path

import common
import e2e_server
from e2e_prompts import PythonCorpus, random_prompts

REPO = common.REPO


def resolve_model(a):
    """(name, path, dummy) for --model; --smoke builds the tests' tiny random Llama."""
    if a.smoke and not a.model:
        sys.path.insert(0, str(REPO / "tests" / "shims"))
        import torchvision_fix  # transformers imports the CUDA-built torchvision (tests/shims)

        torchvision_fix.install()
        common.support()  # tests/support on sys.path
        from tinymodel import make_tiny_llama

        return "tiny-llama", make_tiny_llama(a.out / "models" / "tiny-llama", dtype="float32"), False
    spec = a.model or f"pycode-30m={REPO.parent / 'shared' / 'models' / 'pycode-30m'}"
    if spec in e2e_server.BUILTIN_DUMMY:
        return spec, e2e_server.write_dummy_model(spec, a.out / "models"), True
    name, _, path = spec.partition("=")
    if not path or not (Path(path) / "config.json").exists():
        raise SystemExit(f"--model {spec}: expected NAME=PATH to a checkpoint folder, or one of "
                         f"{sorted(e2e_server.BUILTIN_DUMMY)}")
    return name, Path(path), False


def setup(a):
    """(ctx_info, meta) of a run: ctx_info = (device, model, path, dummy, cfg, page, prompts_for); the prompts of a
    (ctx, batch) depend on nothing else, so every server and every repeat gets the same ones."""
    meta = common.run_meta(a.device)
    device = meta["device"]
    model, path, dummy = resolve_model(a)
    cfg = e2e_server.model_config(path)
    page = 32 if a.smoke else 64
    a.model_cfgs = {model: (cfg, page)}
    meta.update(model=model, model_path=str(path), dummy=dummy)
    if dummy:
        prompts_for = lambda ctx, b, seed_extra=0: random_prompts(  # noqa: E731
            b, ctx, cfg["vocab_size"], seed=ctx * 1009 + b * 7 + seed_extra)
        meta["prompts"] = f"random token ids in [1, {cfg['vocab_size']})"
    else:
        corpus = PythonCorpus(path / "tokenizer.json",
                              min_tokens=50_000 if a.smoke else max(1_500_000, 4 * max(a.ctx)))
        prompts_for = lambda ctx, b, seed_extra=0: corpus.prompts(  # noqa: E731
            b, ctx, seed=ctx * 1009 + b * 7 + seed_extra)
        meta["prompts"] = f"Python standard library text: {corpus.source}"
    return (device, model, path, dummy, cfg, page, prompts_for), meta
