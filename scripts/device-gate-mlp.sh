#!/usr/bin/env bash
# On the GPU machine, after build-dev is built: runs the fused MLP's CPU check once per form under a
# short time limit, before anything times them (a form whose barrier protocol deadlocks would
# otherwise hold a ctest for its full TIMEOUT and the call with it). Prints one line per form on
# stderr and, on stdout, the settings of the forms that passed other than the default, ";"-separated
# (for BSR_MLP_AB_ENV / VIT_AB_ENV). Exit status: the number of forms that failed.
#   scripts/device-gate-mlp.sh [SECONDS per form, default 60]
cd "$(dirname "$0")/.."
secs=${1:-60}
passed=()
failed=0
for form in default "VITRT_BSR_MLP_WARPGROUPS=3" "VITRT_BSR_MLP_WARPGROUPS=3 VITRT_BSR_MLP_PIPE=0"; do
  settings=()
  [ "$form" = default ] || read -r -a settings <<< "$form"
  t0=$(date +%s)
  env "${settings[@]}" VITRT_BSR_MLP_FUSED=1 timeout "$secs" build-dev/tests/test_cuda_bsr \
    --gtest_filter='CudaBsr.FusedMlpMatchesCpu:CudaBsr.SparseVitMatchesDenseFoldedOnCuda' > /tmp/gate_mlp.log 2>&1
  rc=$?
  echo "gate $form: rc=$rc in $(( $(date +%s) - t0 )) s $(grep -E '^\[  (PASSED|FAILED)' /tmp/gate_mlp.log | tr '\n' ' ')" >&2
  [ $rc = 0 ] || { failed=$((failed + 1)); grep -m5 -E "Failure|expected|Which is|timeout" /tmp/gate_mlp.log >&2; }
  [ $rc = 0 ] && [ "$form" != default ] && passed+=("$form")
done
(IFS=';'; echo "${passed[*]}")
exit $failed
