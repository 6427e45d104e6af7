#!/bin/bash
# session 42 H: one case of each GPU verify test refactored onto gpu_cases.verify_window (d3867f1)
timeout 200 python3 -c "import sys; sys.path[:0]=['bench']; import kernel_cases, pytest; sys.exit(pytest.main(['-q', '-rf', '-p', 'no:cacheprovider'] + sys.argv[1:]))" \
  'tests/gpu/test_verify_gpu.py::test_verify_attention[5-17-4097-128]' \
  'tests/gpu/test_verify_gpu.py::test_verify_gluon_ring_launch[3-4097-128-5-4-dtype1]' \
  'tests/gpu/test_verify_gpu.py::test_verify_gluon_ring_launch[17-4097-64-13-2-dtype3]' \
  'tests/gpu/test_verify_gpu.py::test_verify_long_window[9-3-4097-128]' \
  'tests/gpu/test_verify_copy_warp_gpu.py::test_copy_warp_form_equals_cp_async_form[17-4097-64-5]' \
  'tests/gpu/test_verify_lane_sums_gpu.py::test_lane_sums[3-4097-64-5-False]' \
  'tests/gpu/test_verify_lane_sums_gpu.py::test_lane_sums[17-4097-128-8-True]' > $OUT/tests_smoke.txt 2>&1
echo "pytest rc=$?"; tail -4 $OUT/tests_smoke.txt | cut -c1-300
