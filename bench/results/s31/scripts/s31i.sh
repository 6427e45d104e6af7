#!/bin/bash
# session 31 I (no kit): the ring split as a Gluon launch of its own (.work/vg/gring.py: the page kernel without ring
# code, then verify_ring_gluon's program as its own launch, released at the page launch's start) against the ring
# launch (Triton) and the ring program; a correctness check first
nvidia-smi --query-gpu=name --format=csv,noheader
mkdir -p $OUT/gr
timeout 60 python3 -c "
import sys, importlib.util; sys.path[:0]=['bench']
import kernel_cases, pytest
spec = importlib.util.spec_from_file_location('gring', '.work/vg/gring.py'); m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
from sgl_spec.kernels import verify_pages_gluon as vg
vg.launch_pages = m.launch_pages
sys.exit(pytest.main(['-q', '-x', '-p', 'no:cacheprovider', 'tests/gpu/test_kernels_gpu.py', '-k', 'fused_ring and (1-4097-64-5 or 3-63-128-5 or 1-4097-64-8)']))" > $OUT/gr/check.txt 2>&1; tail -1 $OUT/gr/check.txt | cut -c1-200
V="bf/gl=1/fr=0,bf/gl=1/fr=1,bf/gl=1/fr=1/gm=gring"
timeout 90 python3 bench/dev_kernels.py --out $OUT/gr/n5 --skip-check --quantize "" --draft "" --nq 5 \
  --verify "8192:1:64,32768:1:128,131072:1:128,262144:1:64" --verify-variants "$V,$V" > $OUT/gr/log5.txt 2>&1
grep -v "^\[" $OUT/gr/log5.txt | tail -4
timeout 50 python3 bench/dev_kernels.py --out $OUT/gr/n8 --skip-check --quantize "" --draft "" --nq 8 \
  --verify "8192:1:64,262144:1:64" --verify-variants "$V" > $OUT/gr/log8.txt 2>&1
grep -v "^\[" $OUT/gr/log8.txt | tail -2
