#!/usr/bin/env python
"""Write a config-only checkpoint folder for ``--load-format dummy`` (random weights: step costs only, never an
acceptance or quality claim). The shapes live in bench/e2e_server.py (BUILTIN_DUMMY); bench_e2e.py writes the same
folder itself for ``--model llama3-8b-dummy``. This is for launching such a server by hand.

  python bench/make_dummy_model.py llama3-8b-dummy /tmp/llama3-8b-dummy
  python -m sglang.launch_server --model-path /tmp/llama3-8b-dummy/llama3-8b-dummy --load-format dummy ...
"""
import sys

import e2e_server

if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in e2e_server.BUILTIN_DUMMY:
        raise SystemExit(f"usage: {sys.argv[0]} {{{','.join(e2e_server.BUILTIN_DUMMY)}}} OUT_DIR")
    print(e2e_server.write_dummy_model(sys.argv[1], sys.argv[2]))
