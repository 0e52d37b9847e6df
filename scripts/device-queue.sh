#!/usr/bin/env bash
# The GPU call prepared by sessions that had little GPU time, as steps (each builds what it needs
# first: a machine idle for 30 s goes back, so a later call may start bare). Usage on the device
# machine:
#   scripts/device-queue.sh list          # what each step runs
#   scripts/device-queue.sh K             # ~400 s with a bare machine's build
# Steps A-J, R, S, L and M ran on 2026-12-05 (BENCHMARKS.md, that day's sessions; their commands are in this file's
# git history, e.g. `git show a4415dc:scripts/device-queue.sh`); the A/B forms they compared and lost
# are gone from the code.
set -uo pipefail
cd "$(dirname "$0")/.."
step=${1:-list}
targets="vitrt_cli bsr_gemm_bench test_cuda_bsr"
O=${OUT:-device-out}

describe() {
  cat <<'DESC'
F: the defaults' bf16 sweep (blocks 16 / 32 / 64, 0.8-0.9, both MLP shapes) with break-even and the
   issue's targets, after the x-resident kernel's tests (~320 s bare).
J (run on an H100, 2026-12-05 ~16:50 UTC): every CudaBsr test and cuda_bsr ctest, F, ViT-B/16 bs256
   at 90% in blocks 16 / 32 / 64 (~500 s bare).
K (not yet run; meant for the H200, where the standing table is measured): J's measurements, then
   fc1 A/B confirming the defaults that were chosen on an H100: blocks 16 and 32 with two pairs
   (default) against one, block 32 against the streamed kernel, block 64 x-resident (default at
   >= 4 TB/s) against streamed (~560 s bare: split it if the machine starts late).
AB: K's A/B runs alone (after J on a warm machine: K split in two calls).
L (run on an H100, 2026-12-05 ~19:32 UTC): the kernels whose stores became whole lines
   (fused MLP, short and windowed attention): their GPU tests, every CudaBsr test and cuda_bsr_mlp
   ctest, CudaPredictor and the fixture fidelity; then F and ViT-B/16 bs256 block 64 (~480 s bare).
M (run after L, warm, the same day): ViT-B/16 bs256 at blocks 16 / 32, SAM vit_b / vit_h bs32 encoders,
   the fp32 sweep at block 64 (~200 s warm).
Y1 (run on an H100, 2026-12-05 ~22:41 UTC; commands in `git show e554abb:scripts/device-queue.sh`): the
   Supermask model on CUDA, the y-resident kernel (plain and cluster forms: the cluster form was 1.5-2x
   slower and was taken out on 2026-12-06).
P, P0, P00, PT (run on the H200, 2026-12-06 ~03:54 UTC; commands in `git show 1c60d89:scripts/device-queue.sh`):
   block 64 with two pairs of consumer warpgroups, correct and slower; taken out of the kernel.
T (run within PT on 2026-12-06): the standing table's measurements alone: the defaults'
   bf16 sweep with break-even (F without its tests) and ViT-B/16 bs256 at 90% in blocks 16 / 32 / 64
   (~250 s warm).
C (run on an H100, 2026-12-06 ~04:24 UTC; commands in `git show bb1f27a:scripts/device-queue.sh`): the
   x-resident kernel's cache-policy switches (streaming y stores made blocks 16 / 32's default; the
   switches were later replaced by that fixed choice).
S (run on an H100, 2026-12-06 ~05:25 UTC; commands in `git show bb1f27a:scripts/device-queue.sh`): the
   standing table's sweep on the defaults of 6e907be, the fused MLP's streaming stores (no change,
   taken out), block 64's x-resident streaming stores (no change, stay off).
E (run on an H100, 2026-12-06 ~05:37 UTC): the epilogue's terms as template parameters (the streamed
   kernel: bias / GELU / residual; the x-resident kernel: bias) and the x-resident block loop's 32-bit
   descriptor words: every CudaBsr test (defaults, then forced through the streamed kernel), block 64
   fc1 x-resident against streamed alternating twice, the standing table's sweep, ViT-B/16 bs256
   block 64 (~330 s bare).
V (run on an H100, 2026-12-06 ~05:47 UTC): the standing table after the epilogue templates and block 64's new rule: every
   CudaBsr test, the defaults' bf16 sweep, then on an H200 block 64's x-resident / streamed A/B (to
   re-set its rule there) and ViT-B/16 bs256 at blocks 64 / 32 / 16, on another card ViT at block 64
   only (~300 s bare on an H100, ~360 on an H200).
W (run on an H100, 2026-12-06 ~05:53 UTC): the x-resident kernel's barriers by address and compile-time store policy
   (1dd5460), the streamed kernel's item cursor (e9656b8): every CudaBsr test (defaults, then forced
   through the streamed kernel), the standing table's sweep, block 32 fc1 streamed against
   x-resident alternating, ViT-B/16 bs256 block 64 (~300 s bare).
N (not yet run; for the next session): every CudaBsr test and the standing table's sweep; on an H200
   block 64's x-resident / streamed A/B (its rule there was set before this session's instruction
   cuts), ViT-B/16 bs256 at blocks 64 / 32 / 16 and ncu of the x-resident kernel at block 64, fc1 @
   0.9 (the 2.5x target); on an H100 ncu of block 32 at 0.9 instead (block 64 is at that card's store
   floor) (~420 s bare on an H200, ~300 on an H100).
Q (profiles, for the next decisions): ncu source / memory profiles of the y-resident kernel at
   block 16 (fc2 @ 0.9, the break-even miss) and, forced, at block 32 (same structure, 1.8x faster:
   what differs), and of the fused MLP's default form (ViT-B @ 0.9: the 1.8x end-to-end lever),
   with L2 / DRAM throughput and stall reasons (~250 s bare, ~80 s warm).
R (run on an H100, 2026-12-06 ~08:15 UTC): the y-resident kernel's producer warp (a lane per block-row) and the fused MLP's shared
   tiles (bsr_mlp_units.h): every CudaBsr test, the fused MLP under VITRT_BSR_MLP_TILE_CTAS = 0 (ranges,
   as before) / auto / 2 / 4 / 6, alternating, ViT-B/16 bs256 block 64 with ranges and with the default,
   blocks 16 / 32 both linears (fc2 on the y-resident kernel; block 32 also forced onto it), ncu of the
   fused MLP's default (~400 s bare).
U (run on an H100, 2026-12-06 ~08:25 UTC): after R: the tile-sharing rule preferring the largest P within 5% (ViT-B: 4), the
   residual's L2 prefetch in the four-warpgroup fused MLP: every CudaBsr test, the fused MLP (default /
   no prefetch / ranges, alternating), ViT-B/16 bs256 block 64 both ways, fc2 block 32 y-resident
   against streamed (alternating, for its rule), ncu source profile of the y-resident kernel at block 16
   (~400 s bare).
X (run on an H100, 2026-12-06 ~08:45 UTC): the y-resident kernel's wide form at block 32 (384 output columns per unit, x from L2
   twice instead of three times at N = 768; setmaxnreg): every CudaBsr test (defaults, then with
   VITRT_BSR_YRES=1), fc2 block 32 y-resident against streamed alternating twice, blocks 16 / 32
   sweep, ViT-B/16 bs256 at blocks 32 (both ways) and 16, ncu summary of the wide form (~420 s bare).
Z (not yet run): after X: the y-resident epilogue loading the next 64 columns' residual early, block
   32's rule (y-resident without a residual): every CudaBsr test (defaults, VITRT_BSR_YRES=1), blocks
   16 / 32 with the epilogues (fc2: bias + residual) both ways, the plain sweep at blocks 16 / 32,
   ViT-B/16 bs256 at block 16 and at block 32 forced onto the y-resident kernel (~380 s bare).
Y2 (run on an H100, 2026-12-05 ~22:54 UTC): block 16's new default (y-resident for K > 768): the CudaBsr suite, the block-16 A/B against
   VITRT_BSR_YRES=0, ViT-B/16 bs256 block 16 both ways with operator profiles (~330 s bare).
DESC
}

# The fc1 / fc2 A/B: one bsr_gemm_bench sweep per environment setting ("" = the defaults).
fc_ab() {
  local blocks=$1
  shift
  for e in "$@"; do
    timeout 40 env $e build-dev/bin/bsr_gemm_bench --quick --dtypes bf16 --blocks "$blocks" --sparsities 0.8,0.86,0.9 \
      --tokens 50432 --json "$O/ab.json" > "$O/ab.txt" 2>&1
    echo "SUMMARY: '${e:-default}' rc=$?: $(python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print('; '.join('%s b%d s%.2f %.4f (%.2fx) %s ok=%s'%('fc1' if r['N']==3072 else 'fc2',r['block'],r['sparsity'],r['bsr_ms'],r['speedup'],r['variant'][:13],r.get('check_ok')) for r in d['rows'] if r['N']==3072))" "$O/ab.json" 2>&1 | tail -c 900)"
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

vit_bs256() {
  for b in "$@"; do
    timeout 100 build-dev/bin/vitrt bench --device cuda --model vit_b_16 --batch 256 --sparsity 0.9 --block "$b" \
      --dtype bf16 --iters 5 --json > "$O/vit_$b.json" 2> "$O/vit_$b.err"
    echo "SUMMARY: vit_b_16 bs256 bf16 s0.9 block $b rc=$?: $(python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print('dense %.2f ms sparse %.2f ms speedup %.2fx (per round %.2fx)'%(d['dense_ms_per_batch'],d['sparse_ms_per_batch'],d['speedup'],d.get('speedup_median_of_rounds',0)))" "$O/vit_$b.json" 2>&1 | tail -c 300)"
  done
}

case "$step" in
  list) describe ;;
  F)
    BUILD_TARGETS="$targets" OUT="$O" scripts/device-check.sh build
    timeout 60 build-dev/tests/test_cuda_bsr --gtest_filter='CudaBsr.XResident*:CudaBsr.VitMlp*:CudaBsr.Ragged*' > "$O/xres.log" 2>&1
    echo "SUMMARY: XResident / VitMlp / Ragged tests, defaults: rc=$? $(grep -c Failure "$O/xres.log") failures; $(grep -o 'x-resident kernel: [^;]*' "$O/xres.log")"
    bf16_sweep 100
    ;;
  J | K)
    BUILD_TARGETS="$targets" OUT="$O/bsr" TEST_INCLUDE='CudaBsr\.|cuda_bsr' TEST_TIMEOUT=150 scripts/device-check.sh build tests
    "$0" F | grep -v '^SUMMARY: build'
    vit_bs256 16 32 64
    if [ "$step" = K ]; then
      fc_ab 16,32,64 "" "VITRT_BSR_XRES_PAIRS=1" "VITRT_BSR_XRES=1" "VITRT_BSR_XRES=0" ""
    fi
    ;;
  AB)  # K's A/B alone (the second half of K when it is split across two calls on a warm machine)
    BUILD_TARGETS="$targets" OUT="$O/bsr" scripts/device-check.sh build | grep -v '^SUMMARY: build'
    fc_ab 16,32,64 "" "VITRT_BSR_XRES_PAIRS=1" "VITRT_BSR_XRES=1" "VITRT_BSR_XRES=0" ""
    ;;
  L)
    BUILD_TARGETS="$targets test_cuda_attention test_cuda_predictor" OUT="$O/t" TEST_TIMEOUT=150 \
      TEST_INCLUDE='CudaBsr\.|cuda_bsr_mlp|CudaAttention\.|cuda_attention_wgmma|CudaPredictor' scripts/device-check.sh build tests
    "$0" F | grep -v '^SUMMARY: build'
    vit_bs256 64
    ;;
  M)
    BUILD_TARGETS="$targets" OUT="$O/m" scripts/device-check.sh build | grep -v '^SUMMARY: build'
    vit_bs256 16 32
    for m in vit_b vit_h; do
      timeout 150 build-dev/bin/vitrt bench --device cuda --model $m --batch 32 --dtype bf16 --iters 10 --no-decoder \
        --json > "$O/sam_$m.json" 2> "$O/sam_$m.err"
      echo "SUMMARY: $m bs32 bf16 rc=$?: $(python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print('%.1f img/s, %.2f ms/batch'%(d['images_per_s'],d['encoder_ms_per_batch']))" "$O/sam_$m.json" 2>&1 | tail -c 200)"
    done
    timeout 100 build-dev/bin/bsr_gemm_bench --quick --dtypes fp32 --blocks 64 --sparsities 0.8,0.9 \
      --tokens 50432 --json "$O/bsr_fp32.json" > "$O/bsr_fp32.txt" 2>&1
    echo "SUMMARY: fp32 b64 rc=$?"
    python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print('\n'.join('%dx%d b%d s%.2f %.4f / %.4f ms (%.2fx) %s'%(r['N'],r['K'],r['block'],r['sparsity'],r['bsr_ms'],r['dense_ms'],r['speedup'],r['variant']) for r in d['rows']))" "$O/bsr_fp32.json"
    ;;
  Y2)  # (see describe)
    BUILD_TARGETS="bsr_gemm_bench test_cuda_bsr vitrt_cli" OUT="$O/y" scripts/device-check.sh build | grep -v '^SUMMARY: build: ok'
    echo "SUMMARY: built at ${SECONDS} s"
    (cd build-dev/tests && timeout 120 ./test_cuda_bsr --gtest_filter='CudaBsr.*') > "$O/bsr.log" 2>&1
    echo "SUMMARY: CudaBsr (new defaults) rc=$?: $(grep -E '^\[  (PASSED|FAILED) ' "$O/bsr.log" | tr '\n' ' ') $(grep -c Failure "$O/bsr.log") failures"
    grep -B3 -A10 -m2 'Failure' "$O/bsr.log" | head -30
    for e in "VITRT_BSR_YRES=0" ""; do
      timeout 60 env $e build-dev/bin/bsr_gemm_bench --quick --dtypes bf16 --blocks 16 --sparsities 0.8,0.86,0.9 \
        --tokens 50432 --json "$O/y.json" > "$O/y.txt" 2>&1
      echo "SUMMARY: '${e:-default}' rc=$?: $(python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print('; '.join('%s b%d s%.2f %.4f (%.2fx) %s'%('fc1' if r['N']==3072 else 'fc2',r['block'],r['sparsity'],r['bsr_ms'],r['speedup'],r['variant'][:12]) for r in d['rows']))" "$O/y.json" 2>&1 | tail -c 900)"
    done
    for e in "VITRT_BSR_YRES=0" ""; do
      timeout 100 env $e build-dev/bin/vitrt bench --device cuda --model vit_b_16 --batch 256 --sparsity 0.9 --block 16 \
        --dtype bf16 --iters 5 --profile --json > "$O/vit16p.json" 2> "$O/vit16p.err"
      echo "SUMMARY: ViT bs256 b16 '${e:-default}' rc=$?: $(python3 -c "
import json,sys,collections
d=json.load(open(sys.argv[1]))
print('dense %.2f sparse %.2f (%.2fx; eager %.2f / %.2f)'%(d['dense_ms_per_batch'],d['sparse_ms_per_batch'],d['speedup'],d['dense_eager_ms_per_batch'],d['sparse_eager_ms_per_batch']))
p=d.get('profile_sparse') or {}
print('sparse eager profile:', ', '.join('%s x%d %.2f'%(r['op'][:40],r['calls'],r['ms']) for r in sorted(p.get('ops',[]),key=lambda r:-r['ms'])[:8]))
" "$O/vit16p.json" 2>&1 | tail -c 1200)"
    done
    ;;
  E)  # (see describe)
    BUILD_TARGETS="$targets" OUT="$O/e" scripts/device-check.sh build | grep -v '^SUMMARY: build: ok'
    echo "SUMMARY: built at ${SECONDS} s"
    for e in "" "VITRT_BSR_STREAM=1 VITRT_BSR_XRES=0"; do
      (cd build-dev/tests && timeout 120 env $e ./test_cuda_bsr --gtest_filter='CudaBsr.*') > "$O/e.log" 2>&1
      echo "SUMMARY: CudaBsr '${e:-default}' rc=$?: $(grep -E '^\[  (PASSED|FAILED) ' "$O/e.log" | tr '\n' ' ') $(grep -c Failure "$O/e.log") failures"
      grep -B3 -A10 -m2 'Failure' "$O/e.log" | head -30
    done
    fc_ab 64 "VITRT_BSR_XRES=1" "VITRT_BSR_XRES=0" "VITRT_BSR_XRES=1" "VITRT_BSR_XRES=0"
    bf16_sweep 100
    vit_bs256 64
    ;;
  N)  # (see describe)
    BUILD_TARGETS="$targets" OUT="$O/n" scripts/device-check.sh build | grep -v '^SUMMARY: build: ok'
    echo "SUMMARY: built at ${SECONDS} s"
    (cd build-dev/tests && timeout 120 ./test_cuda_bsr --gtest_filter='CudaBsr.*') > "$O/n.log" 2>&1
    echo "SUMMARY: CudaBsr rc=$?: $(grep -E '^\[  (PASSED|FAILED) ' "$O/n.log" | tr '\n' ' ') $(grep -c Failure "$O/n.log") failures"
    bf16_sweep 100
    if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
      fc_ab 64 "VITRT_BSR_XRES=1" "VITRT_BSR_XRES=0" "VITRT_BSR_XRES=1" "VITRT_BSR_XRES=0"
      vit_bs256 64 32 16
      prof=64  # the 2.5x target's kernel on the card it is set on
    else
      vit_bs256 64  # the fused MLP's whole-line stores (f8317c1) against the morning's 1.50-1.55x
      prof=32  # block 64's fc1 sits at this card's store floor; block 32 does not
    fi
    [ "$SECONDS" -lt "${N_BUDGET:-420}" ] || exit 0  # the profile only while the budget allows
    timeout 150 ncu --clock-control none -k "regex:bsr_xres_kernel" --launch-skip 3 --launch-count 1 --section SourceCounters \
      --section WarpStateStats --section SpeedOfLight --section Occupancy --section SchedulerStats --section MemoryWorkloadAnalysis \
      -f -o "$O/ncu_x" build-dev/bin/bsr_gemm_bench --quick --dtypes bf16 --blocks $prof --sparsities 0.9 --tokens 50432 > "$O/ncu_x.log" 2>&1
    echo "SUMMARY: ncu x-resident b$prof fc1 0.9 rc=$?"
    timeout 60 ncu --import "$O/ncu_x.ncu-rep" --page source --print-source sass --csv > "$O/src_x.csv" 2>&1
    timeout 60 ncu --import "$O/ncu_x.ncu-rep" --page details > "$O/det_x.txt" 2>&1
    python3 scripts/ncu_source_top.py "$O/src_x.csv" --top 25 > "$O/top_x.txt" 2>&1
    grep -E "Duration|DRAM Throughput|Memory Throughput|L2 Hit|No Eligible|Active Warps Per|Issue Slots Busy" "$O/det_x.txt" | head -10; head -30 "$O/top_x.txt"
    rm -f "$O"/*.ncu-rep
    ;;
  Z)  # (see describe)
    BUILD_TARGETS="$targets" OUT="$O/z" scripts/device-check.sh build | grep -v '^SUMMARY: build: ok'
    echo "SUMMARY: built at ${SECONDS} s"
    for e in "" "VITRT_BSR_YRES=1"; do
      (cd build-dev/tests && timeout 150 env $e ./test_cuda_bsr --gtest_filter='CudaBsr.*') > "$O/z.log" 2>&1
      echo "SUMMARY: CudaBsr '${e:-default}' rc=$?: $(grep -E '^\[  (PASSED|FAILED) ' "$O/z.log" | tr '\n' ' ') $(grep -c Failure "$O/z.log") failures (${SECONDS} s)"
      grep -B3 -A12 -m2 'Failure' "$O/z.log" | head -40
    done
    for e in "VITRT_BSR_YRES=1" "VITRT_BSR_YRES=0" "VITRT_BSR_YRES=1"; do
      timeout 60 env $e build-dev/bin/bsr_gemm_bench --quick --epilogue --dtypes bf16 --blocks 16,32 --sparsities 0.86,0.9 \
        --tokens 50432 --json "$O/epi.json" > "$O/epi.txt" 2>&1
      echo "SUMMARY: epilogues '$e' rc=$?: $(python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print('; '.join('%s b%d s%.2f %.4f (%.2fx) %s'%('fc1' if r['N']==3072 else 'fc2',r['block'],r['sparsity'],r['bsr_ms'],r['speedup'],r['variant'][:10]) for r in d['rows']))" "$O/epi.json" 2>&1 | tail -c 700)"
    done
    timeout 60 build-dev/bin/bsr_gemm_bench --quick --dtypes bf16 --blocks 16,32 --sparsities 0.8,0.84,0.86,0.88,0.9 \
      --tokens 50432 --json "$O/b1632.json" > "$O/b1632.txt" 2>&1
    echo "SUMMARY: blocks 16 / 32 rc=$?: $(python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print('; '.join('%s b%d s%.2f %.4f (%.2fx) %s'%('fc1' if r['N']==3072 else 'fc2',r['block'],r['sparsity'],r['bsr_ms'],r['speedup'],r['variant'][:10]) for r in d['rows']))" "$O/b1632.json" 2>&1 | tail -c 1300)"
    sed -n '/break-even/,$p' "$O/b1632.txt" | head -12
    for cfg in "16 " "32 VITRT_BSR_YRES=1"; do
      set -- $cfg
      b=$1; e=${2:-}
      timeout 100 env $e build-dev/bin/vitrt bench --device cuda --model vit_b_16 --batch 256 --sparsity 0.9 --block "$b" \
        --dtype bf16 --iters 5 --profile --json > "$O/vit.json" 2> "$O/vit.err"
      echo "SUMMARY: vit_b_16 bs256 b$b '${e:-default}' rc=$?: $(python3 -c "
import json,sys;d=json.load(open(sys.argv[1]))
print('dense %.2f ms sparse %.2f ms speedup %.2fx (per round %.2fx); '%(d['dense_ms_per_batch'],d['sparse_ms_per_batch'],d['speedup'],d.get('speedup_median_of_rounds',0))+'; '.join('%s %.3f'%(o['op'],o['ms']) for o in d['profile_sparse']['ops'] if 'bsr' in o['op']))" "$O/vit.json" 2>&1 | tail -c 500)"
    done
    ;;
  X)  # (see describe)
    BUILD_TARGETS="$targets" OUT="$O/x" scripts/device-check.sh build | grep -v '^SUMMARY: build: ok'
    echo "SUMMARY: built at ${SECONDS} s"
    for e in "" "VITRT_BSR_YRES=1"; do
      (cd build-dev/tests && timeout 150 env $e ./test_cuda_bsr --gtest_filter='CudaBsr.*') > "$O/x.log" 2>&1
      echo "SUMMARY: CudaBsr '${e:-default}' rc=$?: $(grep -E '^\[  (PASSED|FAILED) ' "$O/x.log" | tr '\n' ' ') $(grep -c Failure "$O/x.log") failures (${SECONDS} s)"
      grep -B3 -A12 -m2 'Failure' "$O/x.log" | head -40
    done
    for e in "VITRT_BSR_YRES=1" "" "VITRT_BSR_YRES=1" ""; do
      timeout 60 env $e build-dev/bin/bsr_gemm_bench --quick --dtypes bf16 --blocks 32 --sparsities 0.8,0.82,0.84,0.86,0.88,0.9 \
        --tokens 50432 --json "$O/b32.json" > "$O/b32.txt" 2>&1
      echo "SUMMARY: fc2 block 32 '${e:-default}' rc=$?: $(python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print('; '.join('s%.2f %.4f (%.2fx) %s'%(r['sparsity'],r['bsr_ms'],r['speedup'],r['variant'][:10]) for r in d['rows'] if r['N']==768))" "$O/b32.json" 2>&1 | tail -c 700)"
    done
    timeout 60 build-dev/bin/bsr_gemm_bench --quick --dtypes bf16 --blocks 16 --sparsities 0.8,0.84,0.86,0.88,0.9 \
      --tokens 50432 --json "$O/b16.json" > "$O/b16.txt" 2>&1
    echo "SUMMARY: block 16 rc=$?: $(python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print('; '.join('%s s%.2f %.4f (%.2fx)'%('fc1' if r['N']==3072 else 'fc2',r['sparsity'],r['bsr_ms'],r['speedup']) for r in d['rows']))" "$O/b16.json" 2>&1 | tail -c 700)"
    for cfg in "32 VITRT_BSR_YRES=1" "32 " "16 "; do
      set -- $cfg
      b=$1; e=${2:-}
      timeout 100 env $e build-dev/bin/vitrt bench --device cuda --model vit_b_16 --batch 256 --sparsity 0.9 --block "$b" \
        --dtype bf16 --iters 5 --json > "$O/vit.json" 2> "$O/vit.err"
      echo "SUMMARY: vit_b_16 bs256 b$b '${e:-default}' rc=$?: $(python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print('dense %.2f ms sparse %.2f ms speedup %.2fx (per round %.2fx)'%(d['dense_ms_per_batch'],d['sparse_ms_per_batch'],d['speedup'],d.get('speedup_median_of_rounds',0)))" "$O/vit.json" 2>&1 | tail -c 300)"
    done
    [ "$SECONDS" -lt "${X_BUDGET:-480}" ] || exit 0
    timeout 100 env VITRT_BSR_YRES=1 ncu --clock-control none -k "regex:bsr_yres_kernel" --launch-skip 2 --launch-count 1 --section SpeedOfLight \
      --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats -f -o "$O/ncu_w" \
      build-dev/bin/bsr_gemm_bench --quick --dtypes bf16 --blocks 32 --sparsities 0.9 --tokens 50432 > "$O/ncu_w.log" 2>&1
    echo "SUMMARY: ncu y-resident wide b32 rc=$?"
    timeout 60 ncu --import "$O/ncu_w.ncu-rep" --page details > "$O/det_w.txt" 2>&1
    grep -E "Duration|DRAM Throughput|L2 Cache Throughput|L2 Hit|No Eligible|Eligible Warps|Issue Slots" "$O/det_w.txt" | head -8
    rm -f "$O"/*.ncu-rep
    ;;
  U)  # (see describe)
    BUILD_TARGETS="$targets" OUT="$O/u" scripts/device-check.sh build | grep -v '^SUMMARY: build: ok'
    echo "SUMMARY: built at ${SECONDS} s"
    (cd build-dev/tests && timeout 150 ./test_cuda_bsr --gtest_filter='CudaBsr.*') > "$O/u.log" 2>&1
    echo "SUMMARY: CudaBsr rc=$?: $(grep -E '^\[  (PASSED|FAILED) ' "$O/u.log" | tr '\n' ' ') $(grep -c Failure "$O/u.log") failures (${SECONDS} s)"
    grep -B3 -A12 -m2 'Failure' "$O/u.log" | head -40
    mlp_u() {  # env setting, tag
      timeout 60 env $1 build-dev/bin/bsr_gemm_bench --mlp --blocks 64 --sparsities 0.8,0.9,0.95 --tokens 50432 \
        --json "$O/mlp_$2.json" > "$O/mlp_$2.txt" 2>&1
      echo "SUMMARY: mlp '${1:-default}' rc=$?: $(python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print('; '.join('D%d s%.2f fused %.4f (P%d) two %.4f dense %.4f'%(r['D'],r['sparsity'],r['fused_ms'] or 0,r.get('fused_tile_ctas',-1),r['two_linears_ms'],r['dense_ms']) for r in d['rows']))" "$O/mlp_$2.json" 2>&1 | tail -c 700)"
    }
    mlp_u "" a; mlp_u "VITRT_BSR_MLP_PREFETCH=0" b; mlp_u "VITRT_BSR_MLP_TILE_CTAS=0" c
    mlp_u "" a2; mlp_u "VITRT_BSR_MLP_PREFETCH=0" b2; mlp_u "VITRT_BSR_MLP_TILE_CTAS=0" c2
    for e in "" "VITRT_BSR_MLP_PREFETCH=0" "VITRT_BSR_MLP_TILE_CTAS=0"; do
      timeout 100 env $e build-dev/bin/vitrt bench --device cuda --model vit_b_16 --batch 256 --sparsity 0.9 --block 64 \
        --dtype bf16 --iters 5 --json > "$O/vit.json" 2> "$O/vit.err"
      echo "SUMMARY: vit_b_16 bs256 b64 '${e:-default}' rc=$?: $(python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print('dense %.2f ms sparse %.2f ms speedup %.2fx (per round %.2fx)'%(d['dense_ms_per_batch'],d['sparse_ms_per_batch'],d['speedup'],d.get('speedup_median_of_rounds',0)))" "$O/vit.json" 2>&1 | tail -c 300)"
    done
    for e in "" "VITRT_BSR_YRES=1" "" "VITRT_BSR_YRES=1"; do
      timeout 60 env $e build-dev/bin/bsr_gemm_bench --quick --dtypes bf16 --blocks 32 --sparsities 0.8,0.82,0.84,0.86,0.88,0.9 \
        --tokens 50432 --json "$O/b32.json" > "$O/b32.txt" 2>&1
      echo "SUMMARY: fc2 block 32 '${e:-default}' rc=$?: $(python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print('; '.join('s%.2f %.4f (%.2fx) %s'%(r['sparsity'],r['bsr_ms'],r['speedup'],r['variant'][:10]) for r in d['rows'] if r['N']==768))" "$O/b32.json" 2>&1 | tail -c 700)"
    done
    [ "$SECONDS" -lt "${U_BUDGET:-470}" ] || exit 0
    timeout 120 ncu --clock-control none -k "regex:bsr_yres_kernel" --launch-skip 2 --launch-count 1 --section SourceCounters \
      --section WarpStateStats --section SpeedOfLight --section MemoryWorkloadAnalysis --section SchedulerStats -f -o "$O/ncu_y" \
      build-dev/bin/bsr_gemm_bench --quick --dtypes bf16 --blocks 16 --sparsities 0.9 --tokens 50432 > "$O/ncu_y.log" 2>&1
    echo "SUMMARY: ncu y-resident b16 rc=$?"
    timeout 60 ncu --import "$O/ncu_y.ncu-rep" --page source --print-source sass --csv > "$O/src_y.csv" 2>&1
    timeout 60 ncu --import "$O/ncu_y.ncu-rep" --page details > "$O/det_y.txt" 2>&1
    python3 scripts/ncu_source_top.py "$O/src_y.csv" --top 22 > "$O/top_y.txt" 2>&1
    grep -E "Duration|DRAM Throughput|L2 Cache Throughput|L2 Hit|No Eligible|Eligible Warps|Issue Slots" "$O/det_y.txt" | head -8; head -28 "$O/top_y.txt"
    rm -f "$O"/*.ncu-rep
    ;;
  R)  # (see describe)
    BUILD_TARGETS="$targets" OUT="$O/r" scripts/device-check.sh build | grep -v '^SUMMARY: build: ok'
    echo "SUMMARY: built at ${SECONDS} s"
    (cd build-dev/tests && timeout 150 ./test_cuda_bsr --gtest_filter='CudaBsr.*') > "$O/r.log" 2>&1
    echo "SUMMARY: CudaBsr rc=$?: $(grep -E '^\[  (PASSED|FAILED) ' "$O/r.log" | tr '\n' ' ') $(grep -c Failure "$O/r.log") failures (${SECONDS} s)"
    grep -B3 -A12 -m2 'Failure' "$O/r.log" | head -40
    mlp_run() {  # env setting, tag
      timeout 60 env $1 build-dev/bin/bsr_gemm_bench --mlp --blocks 64 --sparsities 0.8,0.9,0.95 --tokens 50432 \
        --json "$O/mlp_$2.json" > "$O/mlp_$2.txt" 2>&1
      echo "SUMMARY: mlp '${1:-default}' rc=$?: $(python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print('; '.join('D%d s%.2f fused %.4f two %.4f dense %.4f'%(r['D'],r['sparsity'],r['fused_ms'] or 0,r['two_linears_ms'],r['dense_ms']) for r in d['rows']))" "$O/mlp_$2.json" 2>&1 | tail -c 600)"
    }
    mlp_run "VITRT_BSR_MLP_TILE_CTAS=0" r0; mlp_run "" auto; mlp_run "VITRT_BSR_MLP_TILE_CTAS=4" p4
    mlp_run "VITRT_BSR_MLP_TILE_CTAS=0" r0b; mlp_run "VITRT_BSR_MLP_TILE_CTAS=2" p2; mlp_run "VITRT_BSR_MLP_TILE_CTAS=6" p6
    mlp_run "" autob
    for e in "VITRT_BSR_MLP_TILE_CTAS=0" ""; do
      timeout 100 env $e build-dev/bin/vitrt bench --device cuda --model vit_b_16 --batch 256 --sparsity 0.9 --block 64 \
        --dtype bf16 --iters 5 --json > "$O/vit.json" 2> "$O/vit.err"
      echo "SUMMARY: vit_b_16 bs256 b64 '${e:-default}' rc=$?: $(python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print('dense %.2f ms sparse %.2f ms speedup %.2fx (per round %.2fx)'%(d['dense_ms_per_batch'],d['sparse_ms_per_batch'],d['speedup'],d.get('speedup_median_of_rounds',0)))" "$O/vit.json" 2>&1 | tail -c 300)"
    done
    for e in "" "VITRT_BSR_YRES=1"; do
      timeout 60 env $e build-dev/bin/bsr_gemm_bench --quick --dtypes bf16 --blocks 16,32 --sparsities 0.8,0.84,0.86,0.88,0.9 \
        --tokens 50432 --json "$O/b1632.json" > "$O/b1632.txt" 2>&1
      echo "SUMMARY: blocks 16 / 32 '${e:-default}' rc=$?: $(python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print('; '.join('%s b%d s%.2f %.4f (%.2fx) %s'%('fc1' if r['N']==3072 else 'fc2',r['block'],r['sparsity'],r['bsr_ms'],r['speedup'],r['variant'][:10]) for r in d['rows']))" "$O/b1632.json" 2>&1 | tail -c 1200)"
      sed -n '/break-even/,$p' "$O/b1632.txt" | head -8
    done
    [ "$SECONDS" -lt "${R_BUDGET:-480}" ] || exit 0
    timeout 100 ncu --clock-control none -k "regex:bsr_mlp_fused_kernel" --launch-skip 2 --launch-count 1 --section SpeedOfLight \
      --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats -f -o "$O/ncu_m" \
      build-dev/bin/bsr_gemm_bench --mlp --blocks 64 --sparsities 0.9 --tokens 50432 --iters 3 --warmup 1 > "$O/ncu_m.log" 2>&1
    echo "SUMMARY: ncu fused MLP default rc=$?"
    timeout 60 ncu --import "$O/ncu_m.ncu-rep" --page details > "$O/det_m.txt" 2>&1
    grep -E "Duration|DRAM Throughput|L2 Cache Throughput|L2 Hit|No Eligible|Eligible Warps" "$O/det_m.txt" | head -8
    rm -f "$O"/*.ncu-rep
    ;;
  Q)  # (see describe)
    BUILD_TARGETS="bsr_gemm_bench" OUT="$O/q" scripts/device-check.sh build | grep -v '^SUMMARY: build: ok'
    echo "SUMMARY: built at ${SECONDS} s"
    prof() {  # name, kernel regex, env, bench args
      local name=$1 kre=$2 e=$3
      shift 3
      timeout 150 env $e ncu --clock-control none -k "regex:$kre" --launch-skip 2 --launch-count 1 --section SourceCounters \
        --section WarpStateStats --section SpeedOfLight --section Occupancy --section SchedulerStats --section MemoryWorkloadAnalysis \
        --section MemoryWorkloadAnalysis_Tables --section ComputeWorkloadAnalysis -f -o "$O/ncu_$name" build-dev/bin/bsr_gemm_bench "$@" > "$O/ncu_$name.log" 2>&1
      echo "SUMMARY: ncu $name rc=$? (${SECONDS} s)"
      timeout 60 ncu --import "$O/ncu_$name.ncu-rep" --page source --print-source sass --csv > "$O/src_$name.csv" 2>&1
      timeout 60 ncu --import "$O/ncu_$name.ncu-rep" --page details > "$O/det_$name.txt" 2>&1
      python3 scripts/ncu_source_top.py "$O/src_$name.csv" --top 20 > "$O/top_$name.txt" 2>&1
      grep -E "Duration|DRAM Throughput|L2 Cache Throughput|L1/TEX Cache Throughput|L2 Hit|Compute \(SM\) Throughput|No Eligible|Active Warps Per|Eligible Warps|Issue Slots Busy|Registers Per|Executed Ipc A" "$O/det_$name.txt" | head -14
      head -26 "$O/top_$name.txt"
      rm -f "$O/ncu_$name.ncu-rep"
    }
    prof yres16 bsr_yres_kernel "" --quick --dtypes bf16 --blocks 16 --sparsities 0.9 --tokens 50432
    prof yres32 bsr_yres_kernel "VITRT_BSR_YRES=1" --quick --dtypes bf16 --blocks 32 --sparsities 0.9 --tokens 50432
    prof mlp bsr_mlp_fused_kernel "" --mlp --blocks 64 --sparsities 0.9 --tokens 50432 --iters 3 --warmup 1
    ;;
  W)  # (see describe)
    BUILD_TARGETS="$targets" OUT="$O/w" scripts/device-check.sh build | grep -v '^SUMMARY: build: ok'
    echo "SUMMARY: built at ${SECONDS} s"
    for e in "" "VITRT_BSR_STREAM=1 VITRT_BSR_XRES=0"; do
      (cd build-dev/tests && timeout 120 env $e ./test_cuda_bsr --gtest_filter='CudaBsr.*') > "$O/w.log" 2>&1
      echo "SUMMARY: CudaBsr '${e:-default}' rc=$?: $(grep -E '^\[  (PASSED|FAILED) ' "$O/w.log" | tr '\n' ' ') $(grep -c Failure "$O/w.log") failures"
      grep -B3 -A10 -m2 'Failure' "$O/w.log" | head -30
    done
    bf16_sweep 100
    fc_ab 32 "VITRT_BSR_XRES=0" "" "VITRT_BSR_XRES=0" ""
    vit_bs256 64
    ;;
  V)  # (see describe)
    BUILD_TARGETS="$targets" OUT="$O/v" scripts/device-check.sh build | grep -v '^SUMMARY: build: ok'
    echo "SUMMARY: built at ${SECONDS} s"
    (cd build-dev/tests && timeout 120 ./test_cuda_bsr --gtest_filter='CudaBsr.*') > "$O/v.log" 2>&1
    echo "SUMMARY: CudaBsr rc=$?: $(grep -E '^\[  (PASSED|FAILED) ' "$O/v.log" | tr '\n' ' ') $(grep -c Failure "$O/v.log") failures; $(grep -o 'peak memory bandwidth [^)]*' "$O/v.log")"
    grep -B3 -A10 -m2 'Failure' "$O/v.log" | head -30
    bf16_sweep 100
    if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
      fc_ab 64 "VITRT_BSR_XRES=1" "VITRT_BSR_XRES=0" "VITRT_BSR_XRES=1" "VITRT_BSR_XRES=0"
      vit_bs256 64 32 16
    else
      vit_bs256 64
    fi
    ;;
  T)  # (see describe)
    BUILD_TARGETS="$targets" OUT="$O/t" scripts/device-check.sh build | grep -v '^SUMMARY: build: ok'
    echo "SUMMARY: built at ${SECONDS} s"
    bf16_sweep 100
    vit_bs256 64 32 16
    ;;
  *) echo "unknown step '$step'"; describe; exit 2 ;;
esac
