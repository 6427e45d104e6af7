"""The INT8 KV cache: its page format, the pool SGLang holds, the attention backend and its prefill."""
