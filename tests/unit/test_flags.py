"""The --quantspec-* flags (sgl_spec/flags.py) on their own: argparse parsing and the value checks that
``configure`` runs (the server-level startup errors are in tests/server/test_int8_server.py and test_pagetable.py)."""
from __future__ import annotations

import argparse

import pytest

from sgl_spec.flags import FLAGS, add_cli_args, check_draft_options


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
