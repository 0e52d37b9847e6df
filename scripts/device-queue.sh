#!/usr/bin/env bash
# The GPU calls prepared by sessions that have little GPU time, as steps (each builds what it needs
# first: a machine idle for 30 s goes back, so a later call may start bare). Usage on the device
# machine (carry .deps):
#   scripts/device-queue.sh list          # what each step runs
#   OUT=$OUT scripts/device-queue.sh O    # ~340 s with a bare machine's build
# Steps that ran are listed with where their commands are (this file's git history); the A/B forms
# they compared and lost are gone from the code. BENCHMARKS.md has what each measured.
set -uo pipefail
cd "$(dirname "$0")/.."
step=${1:-list}
targets="vitrt_cli bsr_gemm_bench test_cuda_bsr"
O=${OUT:-device-out}

describe() {
  cat <<'DESC'
I (run 2026-12-06 ~10:16 UTC, H100): the fused MLP with its biases in shared memory (fp32; added at the GELU from there)
   and the residual's loads ahead of the last fc2 wait (VITRT_BSR_MLP_RES_EARLY=0 the old place),
   the y-resident kernel's residual prefetched late by default (=start the old way): every CudaBsr test
   (defaults, RES_EARLY=0, YRES=1 with PREFETCH=start), the fused MLP's tests in its other streamed
   forms and the resident one, the fused MLP A/B alternated, ViT-B/16 bs256 at block 64, blocks 16 / 32
   with the ViT's epilogues and ViT-B/16 at block 32 streamed against y-resident (late), ncu of the fused
   MLP (source counters, as call 6 of 2026-12-06 ~10:00: 103.9 M warp instructions, 181.7 us) (~330 s bare).
J (run 2026-12-06 ~10:25 UTC, H200): after I: the split-ring forms with one x slot fewer, b1 read by
   32-bit shared addresses: every CudaBsr test, the fused MLP's tests in all of its streamed forms, the
   fused MLP twice and ViT-B/16 bs256 at block 64. (Split rings were taken out after it: its
   VITRT_BSR_MLP_SPLIT runs now run the other forms.)
K (run twice on H100s, 2026-12-06 ~10:31 and ~10:38 UTC; for an H200): block 32's second linear streamed on >= 4 TB/s cards (the y-resident rule), every
   CudaBsr test, then block 64 at 0.84-0.9 both linears and block 32 fc2, default against
   VITRT_BSR_XRES=0 (streamed) and VITRT_BSR_YRES=1, alternated: whether the x-resident kernel's
   block-64 range (density <= 0.15 on >= 4 TB/s cards) still holds on the H200 (~190 s bare).
O (not yet run; for the next session, first): the LayerNorm's blocks and the short attention's sequences last first
   (VITRT_LAYER_NORM_ORDER=reverse, VITRT_ATTN_SHORT_ORDER=reverse; L2 reuse with the producer and the
   consumer): their tests, then ViT-B/16 bs256 block 64 default / both reversed, twice, with both
   models' LayerNorm, attention and fused MLP rows and the GEMM rows, and SAM vit_b bs32 default /
   LayerNorm reversed with its LayerNorm rows (~340 s bare).
V (not yet run; after O, when an H200 comes; only worth an H200: on any other card it stops before building): the standing table
   on the H200 with today's code (the fused MLP without its spill, `c269c49`'s block-32 rule there):
   every CudaBsr test, T's bf16 sweep, K's comparison (block 64's x-resident range on >= 4 TB/s cards:
   whether fc1 @ 0.9 runs faster streamed there), ViT-B/16 bs256 at block 64 twice (~380 s bare).
M (run 2026-12-06 ~12:22 UTC, H100; both variants lost and were taken out: `git show 9ad2364`): LayerNorm
   rows kept as bf16 and 1 / 2 / 4 rows per half warp (VITRT_LAYER_NORM_ROWS), the short attention's
   K / V by key chunk (VITRT_ATTN_SHORT_KV=chunks): their tests, the attention bench default / chunks
   alternated, ViT-B/16 bs256 block 64 under each setting with the LayerNorm and attention rows of
   both models' eager profiles (215 s bare). Its M case below now runs the defaults only.
L (run 2026-12-06 ~11:40 UTC, H100): what no GPU has run: the split rings' removal (every
   fused MLP form's tests: default, three warpgroups pipelined and plain, resident plain and pipelined),
   the test of a hidden width whose biases do not fit, the residual's early load without its switch
   (no spill left in the default form: the fused MLP timed twice against I's 0.185-0.187 ms at ViT-B @
   0.9 on an H100, 0.174-0.175 on the H200); then K's comparison (on an H200 it decides block
   64's x-resident range on >= 4 TB/s cards, and block 32's streamed default there is first timed) and
   ViT-B/16 bs256 at blocks 64 / 32 (~300 s bare).
T: the standing table's measurements alone: the defaults' bf16 sweep with break-even and ViT-B/16
   bs256 at 90% in blocks 64 / 32 / 16 (~250 s warm, ~430 bare).
Run on 2026-12-06 (H100s, though an H200 was asked for each time; BENCHMARKS.md, that day's sections):
   H, H2 (`git show 74de1f6:scripts/device-queue.sh`, H2's ncu of the fused MLP in this file's history);
   N, Q, R, U, X, Z (`git show 9ce7631:scripts/device-queue.sh`): the morning's prepared commits, ncu
   profiles of the y-resident kernel and the fused MLP, the fused MLP's shared tiles and residual
   prefetch, the y-resident producer warp and block 32's 384-column units, the early residual loads
   (taken out); C, S, E, V, W (`git show bc6b2e5:scripts/device-queue.sh`); P, P0, P00, PT on the H200
   (`git show 1c60d89:scripts/device-queue.sh`).
Run on 2026-12-05: A-J, K, L, M, R, S, Y1, Y2 (`git show e554abb:scripts/device-queue.sh`,
   `git show a4415dc:scripts/device-queue.sh`).
DESC
}

# Every CudaBsr GPU test (or those of $CUDABSR_FILTER) under each environment setting ("" = the
# defaults), failures shown.
cudabsr_tests() {
  for e in "$@"; do
    (cd build-dev/tests && timeout 150 env $e ./test_cuda_bsr --gtest_filter="${CUDABSR_FILTER:-CudaBsr.*}") > "$O/cudabsr.log" 2>&1
    echo "SUMMARY: CudaBsr '${e:-default}' rc=$?: $(grep -E '^\[  (PASSED|FAILED) ' "$O/cudabsr.log" | tr '\n' ' ') $(grep -c Failure "$O/cudabsr.log") failures (${SECONDS} s)"
    grep -B3 -A12 -m2 'Failure' "$O/cudabsr.log" | head -40
  done
}

# The defaults' bf16 sweep (blocks 16 / 32 / 64, 0.8-0.9, both MLP shapes) with break-even and the
# issue's targets, within $1 seconds.
bf16_sweep() {
  timeout "$1" build-dev/bin/bsr_gemm_bench --quick --dtypes bf16 --blocks 16,32,64 --sparsities 0.8,0.82,0.84,0.86,0.88,0.9 \
    --tokens 50432 --json "$O/bsr_bf16.json" > "$O/bsr_bf16.txt" 2>&1
  echo "SUMMARY: bf16 sweep (defaults) rc=$? (${SECONDS} s)"; sed -n '/break-even/,$p' "$O/bsr_bf16.txt"
  python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print('\n'.join('%dx%d b%d s%.2f %.4f / %.4f ms (%.2fx) %s'%(r['N'],r['K'],r['block'],r['sparsity'],r['bsr_ms'],r['dense_ms'],r['speedup'],r['variant']) for r in d['rows']))" "$O/bsr_bf16.json"
}

# ViT-B/16 bs256 bf16, MLPs at 90%, one run per "block[:env]" argument (env: VAR=value ...), with
# the sparse model's block-sparse operators from its eager profile.
vit_bs256() {
  for cfg in "$@"; do
    local b=${cfg%%:*} e=""
    [ "$cfg" != "$b" ] && e=${cfg#*:}
    timeout 100 env $e build-dev/bin/vitrt bench --device cuda --model vit_b_16 --batch 256 --sparsity 0.9 --block "$b" \
      --dtype bf16 --iters 5 --profile --json > "$O/vit_$b.json" 2> "$O/vit_$b.err"
    echo "SUMMARY: vit_b_16 bs256 block $b '${e:-default}' rc=$?: $(python3 -c "
import json,sys;d=json.load(open(sys.argv[1]))
print('dense %.2f ms sparse %.2f ms speedup %.2fx (per round %.2fx); '%(d['dense_ms_per_batch'],d['sparse_ms_per_batch'],d['speedup'],d.get('speedup_median_of_rounds',0))+'; '.join('%s %.3f'%(o['op'],o['ms']) for o in d['profile_sparse']['ops'] if 'bsr' in o['op']))" "$O/vit_$b.json" 2>&1 | tail -c 500)"
  done
}

# The fused MLP (ViT-B and ViT-S shapes, 64-blocks, 0.8 / 0.9 / 0.95), one run per environment setting.
mlp_runs() {
  local i=0
  for e in "$@"; do
    i=$((i + 1))
    timeout 60 env $e build-dev/bin/bsr_gemm_bench --mlp --blocks 64 --sparsities 0.8,0.9,0.95 --tokens 50432 \
      --json "$O/mlp_$i.json" > "$O/mlp_$i.txt" 2>&1
    echo "SUMMARY: mlp '${e:-default}' rc=$?: $(python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print('; '.join('D%d s%.2f fused %.4f (P%d) two %.4f dense %.4f'%(r['D'],r['sparsity'],r['fused_ms'] or 0,r.get('fused_tile_ctas',-1),r['two_linears_ms'],r['dense_ms']) for r in d['rows']))" "$O/mlp_$i.json" 2>&1 | tail -c 700)"
  done
}

# Blocks 16 / 32, both linears, with the ViT's epilogues (fc2: bias + residual), per environment setting.
epilogue_runs() {
  for e in "$@"; do
    timeout 60 env $e build-dev/bin/bsr_gemm_bench --quick --epilogue --dtypes bf16 --blocks 16,32 --sparsities 0.86,0.9 \
      --tokens 50432 --json "$O/epi.json" > "$O/epi.txt" 2>&1
    echo "SUMMARY: epilogues '${e:-default}' rc=$?: $(python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print('; '.join('%s b%d s%.2f %.4f (%.2fx) %s'%('fc1' if r['N']==3072 else 'fc2',r['block'],r['sparsity'],r['bsr_ms'],r['speedup'],r['variant'][:10]) for r in d['rows']))" "$O/epi.json" 2>&1 | tail -c 700)"
  done
}

# ncu of the fused MLP's default form at ViT-B @ 0.9 (64-blocks): where its time goes with the tiles
# shared (source lines by stall, warp states, memory).
ncu_fused() {
  timeout 150 ncu --clock-control none -k "regex:bsr_mlp_fused_kernel" --launch-skip 2 --launch-count 1 --section SourceCounters \
    --section WarpStateStats --section SpeedOfLight --section MemoryWorkloadAnalysis --section SchedulerStats -f -o "$O/ncu_m" \
    build-dev/bin/bsr_gemm_bench --mlp --blocks 64 --sparsities 0.9 --tokens 50432 --iters 3 --warmup 1 > "$O/ncu_m.log" 2>&1
  echo "SUMMARY: ncu fused MLP default rc=$? (${SECONDS} s)"
  timeout 60 ncu --import "$O/ncu_m.ncu-rep" --page source --print-source sass --csv > "$O/src_m.csv" 2>&1
  timeout 60 ncu --import "$O/ncu_m.ncu-rep" --page details > "$O/det_m.txt" 2>&1
  python3 scripts/ncu_source_top.py "$O/src_m.csv" --top 25 > "$O/top_m.txt" 2>&1
  python3 scripts/ncu_regions.py "$O/src_m.csv" --top 12 >> "$O/top_m.txt" 2>&1
  gzip -f "$O/src_m.csv"; rm -f "$O"/*.ncu-rep
}

# ViT-B/16 bs256 block 64 at 90%, one run per environment setting, with the dense and sparse models'
# LayerNorm and attention rows from their eager profiles.
vit_ops() {
  local i=0
  for e in "$@"; do
    i=$((i + 1))
    timeout 100 env $e build-dev/bin/vitrt bench --device cuda --model vit_b_16 --batch 256 --sparsity 0.9 --block 64 \
      --dtype bf16 --iters 5 --profile --json > "$O/vitops_$i.json" 2> "$O/vitops_$i.err"
    echo "SUMMARY: vit_b_16 bs256 b64 '${e:-default}' rc=$?: $(python3 -c "
import json,sys;d=json.load(open(sys.argv[1]))
pick=lambda p:'; '.join('%s %.3f'%(o['op'].split(' [')[0].split(' 5')[0],o['ms']) for o in d[p]['ops'] if o['op'].startswith(('layer_norm 50432','attention [256, 197','mlp_bsr')))
print('dense %.2f sparse %.2f ms %.3fx | dense: %s | sparse: %s'%(d['dense_ms_per_batch'],d['sparse_ms_per_batch'],d['speedup'],pick('profile_dense'),pick('profile_sparse')))" "$O/vitops_$i.json" 2>&1 | tail -c 400)"
  done
}

build() {
  BUILD_TARGETS="$targets" OUT="$O/$1" scripts/device-check.sh build | grep -v '^SUMMARY: build: ok'
  echo "SUMMARY: built at ${SECONDS} s"
}

case "$step" in
  list) describe ;;
  I)  # (see describe)
    build i
    cudabsr_tests "" "VITRT_BSR_MLP_RES_EARLY=0" "VITRT_BSR_YRES=1 VITRT_BSR_YRES_PREFETCH=start"
    CUDABSR_FILTER='CudaBsr.FusedMlp*:CudaBsr.*Vit*' cudabsr_tests "VITRT_BSR_MLP_SPLIT=1 VITRT_BSR_MLP_FUSED=1" \
      "VITRT_BSR_MLP_WARPGROUPS=3 VITRT_BSR_MLP_FUSED=1" "VITRT_BSR_MLP_WARPGROUPS=3 VITRT_BSR_MLP_PIPE=0 VITRT_BSR_MLP_FUSED=1" \
      "VITRT_BSR_MLP_WARPGROUPS=4 VITRT_BSR_MLP_SPLIT=1 VITRT_BSR_MLP_FUSED=1" "VITRT_BSR_MLP_STREAM=0 VITRT_BSR_MLP_FUSED=1"
    mlp_runs "" "VITRT_BSR_MLP_RES_EARLY=0" "" "VITRT_BSR_MLP_RES_EARLY=0"
    vit_bs256 64
    epilogue_runs "" "VITRT_BSR_YRES=1" "" "VITRT_BSR_YRES=1"
    vit_bs256 32 "32:VITRT_BSR_YRES=1"
    ncu_fused
    # (at most 8 files come back: these)
    find "$O" -type f ! -name top_m.txt ! -name det_m.txt ! -name src_m.csv.gz ! -name mlp_1.json ! -name vit_64.json -delete
    ;;
  J)  # (see describe)
    build j
    cudabsr_tests ""
    CUDABSR_FILTER='CudaBsr.FusedMlp*:CudaBsr.*Vit*' cudabsr_tests "VITRT_BSR_MLP_SPLIT=1 VITRT_BSR_MLP_FUSED=1" \
      "VITRT_BSR_MLP_WARPGROUPS=4 VITRT_BSR_MLP_SPLIT=1 VITRT_BSR_MLP_FUSED=1" \
      "VITRT_BSR_MLP_WARPGROUPS=3 VITRT_BSR_MLP_SPLIT=1 VITRT_BSR_MLP_PIPE=0 VITRT_BSR_MLP_FUSED=1" \
      "VITRT_BSR_MLP_WARPGROUPS=3 VITRT_BSR_MLP_FUSED=1" "VITRT_BSR_MLP_WARPGROUPS=3 VITRT_BSR_MLP_PIPE=0 VITRT_BSR_MLP_FUSED=1"
    mlp_runs "" "VITRT_BSR_MLP_SPLIT=1" "VITRT_BSR_MLP_WARPGROUPS=3" ""
    vit_bs256 64
    find "$O" -type f ! -name mlp_1.json ! -name vit_64.json -delete
    ;;
  K)  # (see describe)
    build k
    cudabsr_tests ""
    for e in "" "VITRT_BSR_XRES=0" "VITRT_BSR_YRES=1" "" "VITRT_BSR_XRES=0" "VITRT_BSR_YRES=1"; do
      timeout 60 env $e build-dev/bin/bsr_gemm_bench --quick --dtypes bf16 --blocks 32,64 --sparsities 0.84,0.86,0.88,0.9 \
        --tokens 50432 --json "$O/k.json" > "$O/k.txt" 2>&1
      echo "SUMMARY: '${e:-default}' rc=$?: $(python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print('; '.join('%s b%d s%.2f %.4f (%.2fx) %s'%('fc1' if r['N']==3072 else 'fc2',r['block'],r['sparsity'],r['bsr_ms'],r['speedup'],r['variant'][:9]) for r in d['rows']))" "$O/k.json" 2>&1 | tail -c 900)"
    done
    rm -rf "$O"/*
    ;;
  L)  # (see describe)
    build l
    cudabsr_tests ""
    CUDABSR_FILTER='CudaBsr.FusedMlp*:CudaBsr.*Vit*' cudabsr_tests "VITRT_BSR_MLP_WARPGROUPS=3 VITRT_BSR_MLP_FUSED=1" \
      "VITRT_BSR_MLP_WARPGROUPS=3 VITRT_BSR_MLP_PIPE=0 VITRT_BSR_MLP_FUSED=1" "VITRT_BSR_MLP_STREAM=0 VITRT_BSR_MLP_FUSED=1" \
      "VITRT_BSR_MLP_STREAM=0 VITRT_BSR_MLP_PIPE=1 VITRT_BSR_MLP_FUSED=1"
    for e in "" "VITRT_BSR_XRES=0" "VITRT_BSR_YRES=1" "" "VITRT_BSR_XRES=0" "VITRT_BSR_YRES=1"; do
      timeout 60 env $e build-dev/bin/bsr_gemm_bench --quick --dtypes bf16 --blocks 32,64 --sparsities 0.84,0.86,0.88,0.9 \
        --tokens 50432 --json "$O/k.json" > "$O/k.txt" 2>&1
      echo "SUMMARY: '${e:-default}' rc=$?: $(python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print('; '.join('%s b%d s%.2f %.4f (%.2fx) %s'%('fc1' if r['N']==3072 else 'fc2',r['block'],r['sparsity'],r['bsr_ms'],r['speedup'],r['variant'][:9]) for r in d['rows']))" "$O/k.json" 2>&1 | tail -c 900)"
    done
    mlp_runs "" ""
    vit_bs256 64 32
    find "$O" -type f ! -name 'vit_*.json' -delete
    ;;
  M)  # (see describe)
    targets="vitrt_cli test_cuda_ops test_cuda_attention"
    build m
    for e in ""; do
      (cd build-dev/tests && timeout 120 env $e ./test_cuda_ops --gtest_filter='CudaOps.LayerNorm*') > "$O/ops.log" 2>&1
      echo "SUMMARY: CudaOps.LayerNorm* '${e:-default}' rc=$?: $(grep -E '^\[  (PASSED|FAILED) ' "$O/ops.log" | tr '\n' ' ')"
      grep -B2 -A8 -m2 Failure "$O/ops.log" | head -24
    done
    for e in ""; do
      (cd build-dev/tests && timeout 120 env $e ./test_cuda_attention \
        --gtest_filter='CudaAttention.ShortSequences:CudaAttention.PlainAttention:CudaAttention.RelposGlobalSmall') > "$O/attn.log" 2>&1
      echo "SUMMARY: short attention tests '${e:-default}' rc=$?: $(grep -E '^\[  (PASSED|FAILED) ' "$O/attn.log" | tr '\n' ' ')"
      grep -B2 -A8 -m2 Failure "$O/attn.log" | head -24
    done
    for e in "" ""; do
      timeout 60 env $e build-dev/tests/test_cuda_attention --gtest_filter='CudaAttentionBench.*' > "$O/ab.txt" 2>&1
      echo "SUMMARY: attention bench '${e:-default}' rc=$?: $(grep -E 'self-attention' "$O/ab.txt" | sed -E 's/ +/ /g' | tr '\n' ';' | tail -c 400)"
    done
    vit_ops "" ""
    find "$O" -type f ! -name 'vitops_[12].json' -delete
    ;;
  O)  # (see describe)
    targets="vitrt_cli test_cuda_ops test_cuda_attention"
    build o
    (cd build-dev/tests && timeout 120 env VITRT_LAYER_NORM_ORDER=reverse ./test_cuda_ops --gtest_filter='CudaOps.LayerNorm*') > "$O/ops.log" 2>&1
    echo "SUMMARY: CudaOps.LayerNorm* reverse rc=$?: $(grep -E '^\[  (PASSED|FAILED) ' "$O/ops.log" | tr '\n' ' ')"
    grep -B2 -A8 -m2 Failure "$O/ops.log" | head -24
    (cd build-dev/tests && timeout 120 env VITRT_ATTN_SHORT_ORDER=reverse ./test_cuda_attention \
      --gtest_filter='CudaAttention.ShortSequences:CudaAttention.PlainAttention:CudaAttention.RelposGlobalSmall') > "$O/attn.log" 2>&1
    echo "SUMMARY: short attention tests reverse rc=$?: $(grep -E '^\[  (PASSED|FAILED) ' "$O/attn.log" | tr '\n' ' ')"
    grep -B2 -A8 -m2 Failure "$O/attn.log" | head -24
    both="VITRT_LAYER_NORM_ORDER=reverse VITRT_ATTN_SHORT_ORDER=reverse"
    vit_ops "" "$both" "" "$both"
    # SAM vit_b bs32 (issue 3): its LayerNorms (fp32 rows of 131072 x 768: 403 MB, L2 holds ~12%).
    for e in "" VITRT_LAYER_NORM_ORDER=reverse; do
      timeout 120 env $e build-dev/bin/vitrt bench --device cuda --model vit_b --batch 32 --dtype bf16 --iters 10 --no-decoder \
        --profile --json > "$O/sam.json" 2> "$O/sam.err"
      echo "SUMMARY: SAM vit_b bs32 '${e:-default}' rc=$?: $(python3 -c "
import json,sys;d=json.load(open(sys.argv[1]));p=d['profile']
print('%.1f img/s %.2f ms; eager %.2f: '%(d['images_per_s'],d['encoder_ms_per_batch'],p['eager_forward_ms'])+'; '.join('%s %.3f x%d'%(r['op'],r['ms'],r['calls']) for r in p['ops'] if r['op'].startswith('layer_norm')))" "$O/sam.json" 2>&1 | tail -c 400)"
    done
    for i in 1 2 3 4; do
      echo "SUMMARY: run $i GEMM rows: $(python3 -c "
import json,sys;d=json.load(open(sys.argv[1]))
f=lambda p:' '.join('%s=%.3f'%(o['op'].split(' ')[1].replace('50432x',''),o['ms']) for o in d[p]['ops'] if o['op'].startswith('linear 50432'))
print('dense', f('profile_dense'), '| sparse', f('profile_sparse'))" "$O/vitops_$i.json" 2>&1 | tail -c 300)"
    done
    find "$O" -type f ! -name 'vitops_[1-4].json' -delete
    ;;
  V)  # (see describe)
    if ! nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
      echo "SUMMARY: not an H200 ($(nvidia-smi --query-gpu=name --format=csv,noheader)): step V stops here"; exit 0
    fi
    build v
    cudabsr_tests ""
    bf16_sweep 120
    for e in "" "VITRT_BSR_XRES=0" "" "VITRT_BSR_XRES=0"; do
      timeout 60 env $e build-dev/bin/bsr_gemm_bench --quick --dtypes bf16 --blocks 64 --sparsities 0.84,0.86,0.88,0.9,0.92 \
        --tokens 50432 --json "$O/k.json" > "$O/k.txt" 2>&1
      echo "SUMMARY: '${e:-default}' rc=$?: $(python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print('; '.join('%s b%d s%.2f %.4f (%.2fx) %s'%('fc1' if r['N']==3072 else 'fc2',r['block'],r['sparsity'],r['bsr_ms'],r['speedup'],r['variant'][:9]) for r in d['rows'] if r['N']==3072))" "$O/k.json" 2>&1 | tail -c 700)"
    done
    vit_bs256 64
    mv "$O/vit_64.json" "$O/vit_64_1.json"
    vit_bs256 64
    find "$O" -type f ! -name 'vit_64*.json' ! -name bsr_bf16.json -delete
    ;;
  T)  # (see describe)
    build t
    bf16_sweep 100
    vit_bs256 64 32 16
    ;;
  *) echo "unknown step '$step'"; describe; exit 2 ;;
esac
