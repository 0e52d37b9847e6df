#!/usr/bin/env bash
# The GPU calls prepared by sessions that had no GPU, one step per device call (each builds what it
# needs first: a machine idle for 30 s goes back, so a later call may start bare). Every step ends
# with device-check.sh's SUMMARY lines. Usage on the device machine:
#   scripts/device-queue.sh list          # what each step runs
#   scripts/device-queue.sh A|B           # one step (~400-550 s each, under the 600 s call limit)
# What the steps measure and why: BENCHMARKS.md, sections "Session of 2026-12-05, 07:37 UTC onwards"
# and "... 05:45 UTC onwards".
set -uo pipefail
cd "$(dirname "$0")/.."
step=${1:-list}
targets="vitrt_cli bsr_gemm_bench test_cuda_bsr test_cuda_attention"

describe() {
  cat <<'EOF'
A: correctness of every unmeasured form: the x-resident BSR kernel's Pipe and grouped forms (blocks
   16 / 32 / 64), the sparse ViT on CUDA with the MLP simplification and the class-token last block
   (against the CPU and the dense-folded model); and the rel-pos attention tests (CudaAttention.Relpos*).
B: speed, issue 4: the BSR quick sweep (blocks 16 / 32 / 64) with the x-resident forms as A/B;
   ViT-B/16 bs256 bf16 dense vs sparse (with its eager profiles), and again with
   VITRT_BSR_MLP_SIMPLIFY=0.
(Steps C and D, the SAM encoders and the attention kernels alone under each global attention
variant, are gone: those variants were measured (BENCHMARKS.md, 2026-12-05 09:07, call 2) and taken
out; VITRT_ATTN_WGMMA keeps only wg2 and 0, both measured before.)
Estimated from earlier calls, each with a bare machine's build: A ~450 s, B ~520 s.
EOF
}

case "$step" in
  list) describe ;;
  A)
    BUILD_TARGETS="$targets" \
    TEST_INCLUDE='CudaAttention\.Relpos|CudaBsr\.(XResident|SparseVit|ImageLogits|FusedMlp)|cuda_bsr_xres' \
    TEST_TIMEOUT=150 scripts/device-check.sh tests
    ;;
  B)
    BUILD_TARGETS="$targets" BSR_SWEEP=0 BSR_PY=0 VIT_REF=0 BSR_EPILOGUE=0 BSR_MLP=0 VIT_DTYPES=bf16 \
    BSR_QUICK="--quick --blocks 16,32,64" \
    BSR_AB_ENV="VITRT_BSR_XRES_PIPE=1;VITRT_BSR_XRES=1;VITRT_BSR_XRES=1 VITRT_BSR_XRES_PIPE=1" \
    VIT_AB_ENV="VITRT_BSR_MLP_SIMPLIFY=0" \
    scripts/device-check.sh bsr
    ;;
  *) echo "unknown step '$step'"; describe; exit 2 ;;
esac
