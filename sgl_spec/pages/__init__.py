"""Draft page policies: which quantized pages each request's draft reads."""
