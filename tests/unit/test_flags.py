"""The --quantspec-* flags (sgl_spec/flags.py) on their own: argparse parsing and the value checks that
``configure`` runs (the server-level startup errors are in tests/server/test_int8_server.py and test_pagetable.py)."""
from __future__ import annotations

import argparse
import re

import pytest

from sgl_spec.flags import FLAGS, SPECULATE_CHOICES, add_cli_args, check_draft_options


def _defaults(**over):
    opts = {k: default for k, (default, _) in FLAGS.items()}
    opts.update(over)
    return opts


def test_defaults_pass_and_parse_as_none():
    check_draft_options(_defaults(), {})
    parser = argparse.ArgumentParser()
    add_cli_args(parser)
    args = parser.parse_args([])
    assert all(getattr(args, k) is None for k in FLAGS)  # None: "not given", told apart from the default
    args = parser.parse_args(["--quantspec-topk-ratio", "0.1", "--quantspec-dense-draft"])
    assert args.quantspec_topk_ratio == 0.1 and args.quantspec_dense_draft is True


@pytest.mark.parametrize("name", [k for k, (_, kw) in FLAGS.items() if "choices" in kw])
def test_every_choice_flag_rejects_a_bad_value_by_name(name):
    with pytest.raises(ValueError, match=f"^--{name.replace('_', '-')} must be one of .*, got bogus$"):
        check_draft_options(_defaults(**{name: "bogus"}), {name: "bogus"})


@pytest.mark.parametrize("name,value,msg", [
    ("quantspec_topk_ratio", 0.0, "in \\(0, 1\\]"), ("quantspec_min_pages", 0, ">= 1"),
    ("quantspec_sink_pages", -1, ">= 0"), ("quantspec_recent_share", 1.5, "in \\[0, 1\\]"),
    ("quantspec_score_ema", 1.0, "in \\[0, 1\\)"), ("quantspec_cost_model", "/no/such/file.json", "no such file"),
])
def test_numeric_ranges_and_paths(name, value, msg):
    with pytest.raises(ValueError, match=f"--{name.replace('_', '-')}.*{msg}"):
        check_draft_options(_defaults(**{name: value}), {name: value})


def test_flags_that_do_not_apply_together():
    with pytest.raises(ValueError, match="--quantspec-draft-pages chooses sparse draft pages"):
        check_draft_options(_defaults(quantspec_dense_draft=True), {"quantspec_draft_pages": "topk"})
    with pytest.raises(ValueError, match="--quantspec-score-ema tunes the score-driven draft pages"):
        check_draft_options(_defaults(quantspec_draft_pages="streaming"), {"quantspec_draft_pages": "streaming",
                                                                           "quantspec_score_ema": 0.3})


def _helps(parser) -> dict:
    return {a.option_strings[0]: a.help for a in parser._actions if a.option_strings}


def test_help_of_sglangs_parser_names_the_int8_only_mode():
    """--help as launch_server prints it: SGLang's own parser, then the plugin's hook on ServerArgs.add_cli_args."""
    from sglang.srt.server_args import ServerArgs

    from sgl_spec import plugin

    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    plugin._add_cli_args(None, parser)
    helps = _helps(parser)
    backend = " ".join(helps["--attention-backend"].split())
    assert backend.startswith("Choose the kernels for attention layers.")  # SGLang's text stays first
    assert "'quantspec' alone (without --spec-algo quantspec): the INT8-only, non-speculative mode" in backend
    assert "--attention-backend quantspec alone" in helps["--spec-algo"]
    assert "INT8-only" in parser.format_help()


def test_help_states_each_speculate_choice_and_measures_speed_on_a_gpu():
    parser = argparse.ArgumentParser()
    parser.add_argument("--attention-backend", help="Choose the kernels for attention layers.")
    add_cli_args(parser)
    helps = _helps(parser)
    speculate = helps["--quantspec-speculate"]
    assert all(f"'{choice}': " in speculate for choice in SPECULATE_CHOICES)
    assert "stock" not in speculate  # no comparison with stock SGLang: it depends on the device (slower on CPU)
    speed = re.compile(r"\b(faster|slower|speedups?|wins?|lost|loses)\b", re.I)
    for flag, text in helps.items():
        if text and speed.search(text):
            assert re.search(r"\bGPU\b", text), f"{flag}'s help compares speed without naming a GPU"
