"""sgl_spec/patches: the adapter of each supported SGLang release offers the same functions and constants, so the
rest of the package can call ``sglang().<name>`` without knowing the release (the other release's module is read as
a file: importing it needs only its own imports, which are deferred into the functions)."""
import ast
from pathlib import Path

import sgl_spec.patches as patches

DIR = Path(patches.__file__).parent


def _public(path: Path) -> set:
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name) and not t.id.startswith("_")}
    return names


def test_release_adapters_offer_the_same_names():
    mods = [DIR / f"sglang_{v.replace('.', '_')}.py" for v in patches.SUPPORTED]
    assert all(m.exists() for m in mods)
    first, *rest = (_public(m) for m in mods)
    for m, names in zip(mods[1:], rest):
        assert names == first, f"{m.name} differs from {mods[0].name}: {sorted(names ^ first)}"
    assert {"flash_attention", "server_args_hooks", "spec_logprobs"} <= first
