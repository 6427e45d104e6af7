#!/bin/bash
# session 33: all GPU kernel tests on the refactored tree (stage-1 kernels moved into verify_stage1.py / draft_pages.py)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
timeout ${TMO:-540} python3 -c "import sys; sys.path[:0]=['bench']; import kernel_cases, pytest; sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', '-x', 'tests/gpu/test_kernels_gpu.py']))" > $OUT/kernel_tests.txt 2>&1; echo "pytest rc=$?"
tail -5 $OUT/kernel_tests.txt | cut -c1-300
