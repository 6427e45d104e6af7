"""dev diag: bench/dev_kernels.py with every page-table row sorted (physical pages in logical order) when SEQ=1."""
import os, sys
sys.path[:0] = ['bench']
import dev_verify
if os.environ.get("SEQ") == "1":
    dev_verify.alias_pages = lambda ids: ids.sort(dim=-1).values.contiguous()
import dev_kernels
dev_kernels.main()
