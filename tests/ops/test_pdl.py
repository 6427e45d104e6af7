"""pdl_kwargs: programmatic dependent launch only for CUDA tensors on sm_90+, never under the interpreter or on CPU
(the kernels' ``griddepcontrol.wait`` is inline PTX). The GPU kernel and server tests run the kernels with it on."""
import torch

from sgl_spec.kernels.common import pdl


def test_off_on_cpu_and_under_the_interpreter(monkeypatch):
    assert pdl.pdl_kwargs(torch.device("cpu")) == {"PDL": False}
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert pdl.pdl_kwargs(torch.device("cuda", 0)) == {"PDL": False}  # decided before any CUDA query


def test_switch_and_capability(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    monkeypatch.setattr(pdl, "_supported", lambda index: index == 0)
    assert pdl.pdl_kwargs(torch.device("cuda", 0)) == {"PDL": True, "launch_pdl": True}
    assert pdl.pdl_kwargs(torch.device("cuda", 1)) == {"PDL": False}  # e.g. an sm_80 device
    monkeypatch.setattr(pdl, "ENABLED", False)
    assert pdl.pdl_kwargs(torch.device("cuda", 0)) == {"PDL": False}
