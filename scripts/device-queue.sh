#!/usr/bin/env bash
# The GPU call prepared by sessions that had little or no GPU time, as steps (each builds what it
# needs first: a machine idle for 30 s goes back, so a later call may start bare). Every step ends
# with device-check.sh's SUMMARY lines. Usage on the device machine:
#   scripts/device-queue.sh list          # what each step runs
#   scripts/device-queue.sh A             # ~350 s with a bare machine's build
# What the step measures and why: BENCHMARKS.md, section "Session of 2026-12-05, 09:07 UTC onwards".
set -uo pipefail
cd "$(dirname "$0")/.."
step=${1:-list}
targets="vitrt_cli bsr_gemm_bench test_cuda_bsr"
O=${OUT:-device-out}

describe() {
  cat <<'DESC'
A: the x-resident BSR kernel after the block-16 fix: its kernel tests grouped and ungrouped (the
   ungrouped block-16 epilogue stored nothing on the H100 run of 2026-12-05), then every CudaBsr test
   and the cuda_bsr_xres* ctests; then issue 4's speed: the BSR quick sweep (blocks 16 / 32 / 64) with
   the x-resident forms (VITRT_BSR_XRES=1, with and without VITRT_BSR_XRES_PIPE=1; Pipe alone for
   block 64) as A/B, and ViT-B/16 bs256 bf16 dense vs sparse (the MLP simplification and the
   class-token last block on; once more with VITRT_BSR_MLP_SIMPLIFY=0). Make a form a default only if
   the A/B shows it faster. (Run on the H200 on 2026-12-05, 12:08 UTC: block 32 grouped with Pipe
   became the default; BENCHMARKS.md, 11:17 session.)
B (not yet run): block 32's new default (the x-resident kernel, grouped, with Pipe, for K <= 768): the
   CudaBsr tests and the x-resident / streamed ctests, then bf16 sweeps of blocks 16 / 32 around the break-even (0.8-0.9),
   block 16's mma.sync variants (--sweep), and ViT-B/16 bs256 bf16 with 90% MLPs in 32-blocks (~380 s bare).
C (not yet run): B cut to ~300 s on a bare machine (the tests, block 32's sweep, the ViT at block 32).
D (run on an H100, 2026-12-05 14:48 UTC; BENCHMARKS.md, 14:10 session): the x-resident kernel's new forms (2026-12-05 afternoon), none a default yet: the W
   ring in chunks of up to 8 KB (VITRT_BSR_XRES_CHUNK=16; one bulk copy and barrier pair per chunk),
   a chunk's blocks retired together (VITRT_BSR_XRES_PIPE=chunk), the GELU in bf16x2
   (VITRT_BSR_XRES_GELU=bf16x2). Its kernel tests (default and 8 KB chunks), fc1-shape A/B of blocks
   16 / 32 / 64 at 0.8 / 0.86 / 0.9 (block 16 forced onto the kernel, VITRT_BSR_XRES=1), the
   --epilogue A/B of the GELU, the default's break-even sweep, ViT-B/16 bs256 at blocks 32 (default
   and 8 KB chunks) and 64, the cuda_bsr ctests, and B's block-16 mma.sync variant sweep last
   (~450 s bare). Make a form a default only where the A/B shows it faster.
   (8 KB chunks turned out not to fit at blocks 32 / 16: those runs measured the other kernels.)
E (run on an H100, 14:58 UTC): the new defaults (blocks 32 / 16 chunked; block 16 on the x-resident kernel; block 16's
   mma.sync default tm256.r2.s3.w4): the kernel tests, block 16's chunk x ring-size grid (2 / 4 / 8
   blocks, 8 / 16 / 24 KB, chunk by chunk) and retirement modes, block 32's ring sizes, the defaults'
   break-even sweep and targets, ViT-B/16 bs256 at block 64, the cuda_bsr ctests (~400 s bare).
F (run on an H100, 15:07 UTC): the defaults' sweep and the kernel tests (~320 s bare).
G (not yet run): on the H200, the same as F, then the x-resident kernel's tests with TMA stores and
   fc1-shape A/B of blocks 16 / 32 / 64: default, TMA stores (VITRT_BSR_XRES_TMA_STORE=1), the leaner
   chunk loop (VITRT_BSR_XRES_PIPE=lean, ~43 instructions per block against ~59 at block 16), block 32
   x-resident against streamed, block 32 with 2-block chunks retired chunk by chunk; the tensor side's
   cost per block alone (wgmma_rate_bench's block-sparse forms) and an ncu source profile of block 16
   on the x-resident kernel (`scripts/device-queue.sh G`, ~450 s bare).
H (not yet run): two pairs of consumer warpgroups (VITRT_BSR_XRES_PAIRS=2, blocks 16 / 32): the
   x-resident kernel's tests with it (default chunks, one- and 2-block chunks), fc1 / fc2 A/B of
   blocks 16 / 32 at 0.8 / 0.86 / 0.9 (default, two pairs, block 32 forced onto the kernel with one
   and two pairs, 2-block chunks), then every CudaBsr test with it (~300 s bare).
I (not yet run): two pairs the default at block 16; the table-driven chunk loop
   (VITRT_BSR_XRES_PIPE=tables): kernel tests in its forms, fc1 A/B of blocks 16 / 32 / 64, every
   CudaBsr test with it, ViT-B/16 bs256 at block 64 (~330 s bare).
J (not yet run): the new defaults (blocks 16 / 32 table-driven chunk by chunk; block 16 with two
   pairs; block 64 streamed below 4 TB/s): every CudaBsr test and cuda_bsr ctest, the defaults' bf16
   sweep with break-even and targets, ViT-B/16 bs256 at 90% in blocks 16 / 32 / 64 (~330 s bare).
(The earlier steps, the global attention variants, were measured on 2026-12-05 and those variants
taken out.)
DESC
}

case "$step" in
  list) describe ;;
  A)
    mkdir -p "$O/bsr"
    BUILD_TARGETS="$targets" OUT="$O" scripts/device-check.sh build
    for g in 1 0; do
      VITRT_BSR_XRES_GROUP=$g timeout 60 build-dev/tests/test_cuda_bsr --gtest_filter='CudaBsr.XResident*' > "$O/xres_group$g.log" 2>&1
      echo "SUMMARY: XResident kernel, VITRT_BSR_XRES_GROUP=$g: rc=$? $(grep -c Failure "$O/xres_group$g.log") failures"
    done
    BUILD_TARGETS="$targets" OUT="$O/bsr" TEST_INCLUDE='CudaBsr|cuda_bsr' TEST_TIMEOUT=150 \
    BSR_SWEEP=0 BSR_PY=0 VIT_REF=0 BSR_EPILOGUE=0 BSR_MLP=0 VIT_DTYPES=bf16 \
    BSR_QUICK="--quick --blocks 16,32,64 --sparsities 0.8,0.86,0.9" \
    BSR_AB_ENV="VITRT_BSR_XRES=1;VITRT_BSR_XRES=1 VITRT_BSR_XRES_PIPE=1;VITRT_BSR_XRES_PIPE=1" \
    VIT_AB_ENV="VITRT_BSR_MLP_SIMPLIFY=0" \
    scripts/device-check.sh tests bsr
    ;;
  B|C)
    # C: B cut to what fits ~300 s on a bare machine (no block-16 sweeps).
    blocks=16,32; [ "$step" = C ] && blocks=32
    mkdir -p "$O/bsr"
    BUILD_TARGETS="$targets" OUT="$O" scripts/device-check.sh build
    BUILD_TARGETS="$targets" OUT="$O/bsr" TEST_INCLUDE='CudaBsr\.|cuda_bsr_xres|cuda_bsr_stream' TEST_TIMEOUT=150 \
      scripts/device-check.sh tests
    timeout 200 build-dev/bin/bsr_gemm_bench --dtypes bf16 --blocks $blocks --sparsities 0.8,0.82,0.84,0.86,0.9 \
      --tokens 50432 --iters 10 --json "$O/bsr_bf16.json" > "$O/bsr_bf16.txt" 2>&1
    echo "SUMMARY: bf16 sweep, blocks $blocks, rc=$?"; sed -n '/break-even/,$p' "$O/bsr_bf16.txt"
    timeout 150 build-dev/bin/vitrt bench --device cuda --model vit_b_16 --batch 256 --sparsity 0.9 --block 32 \
      --dtype bf16 --iters 5 --json > "$O/vit_b32.json" 2> "$O/vit_b32.err"
    echo "SUMMARY: vit_b_16 bs256 bf16 s0.9 block 32 rc=$?: $(python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print('dense %.2f ms sparse %.2f ms speedup %.2fx (per round %.2fx), fused MLPs %s'%(d['dense_ms_per_batch'],d['sparse_ms_per_batch'],d['speedup'],d.get('speedup_median_of_rounds',0),d.get('fused_mlps')))" "$O/vit_b32.json" 2>&1 | tail -c 300)"
    if [ "$step" = B ]; then  # block 16's mma.sync variants (never swept: "block 16 keeps 128-token tiles")
      timeout 150 build-dev/bin/bsr_gemm_bench --sweep --blocks 16 --sparsities 0.86,0.9 --iters 5 \
        --json "$O/bsr_sweep16.json" > "$O/bsr_sweep16.txt" 2>&1
      echo "SUMMARY: block-16 variant sweep rc=$?"; grep -E "^--|best" "$O/bsr_sweep16.txt" | head -20
    fi
    ;;
  D)
    mkdir -p "$O/bsr"
    BUILD_TARGETS="$targets" OUT="$O" scripts/device-check.sh build
    for ch in "" 16; do  # the kernel itself first: a protocol fault shows here, under a short limit
      VITRT_BSR_XRES_CHUNK=$ch timeout 60 build-dev/tests/test_cuda_bsr --gtest_filter='CudaBsr.XResident*' > "$O/xres_chunk$ch.log" 2>&1
      echo "SUMMARY: XResident kernel, VITRT_BSR_XRES_CHUNK=${ch:-default}: rc=$? $(grep -c Failure "$O/xres_chunk$ch.log") failures"
    done
    ab=("" "VITRT_BSR_XRES_CHUNK=16" "VITRT_BSR_XRES_CHUNK=16 VITRT_BSR_XRES_PIPE=chunk" "VITRT_BSR_XRES=1"
        "VITRT_BSR_XRES=1 VITRT_BSR_XRES_CHUNK=16" "VITRT_BSR_XRES=1 VITRT_BSR_XRES_CHUNK=16 VITRT_BSR_XRES_PIPE=chunk"
        "VITRT_BSR_XRES=1 VITRT_BSR_XRES_CHUNK=16 VITRT_BSR_XRES_PIPE=1" "VITRT_BSR_XRES=1 VITRT_BSR_XRES_CHUNK=4 VITRT_BSR_XRES_PIPE=chunk"
        "VITRT_BSR_XRES_CHUNK=2" "VITRT_BSR_XRES_CHUNK=2 VITRT_BSR_XRES_PIPE=chunk" "" "VITRT_BSR_XRES_CHUNK=16")
    for i in "${!ab[@]}"; do  # the default and 8 KB chunks twice, apart, for the noise
      timeout 60 env ${ab[$i]} build-dev/bin/bsr_gemm_bench --dtypes bf16 --blocks 16,32,64 --sparsities 0.8,0.86,0.9 \
        --tokens 50432 --iters 20 --quick --json "$O/bsr/ab$i.json" > "$O/bsr/ab$i.txt" 2>&1
      echo "SUMMARY: A/B $i '${ab[$i]:-default}' rc=$?: $(python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print('; '.join('b%d s%.2f %.4f ms (%.2fx)'%(r['block'],r['sparsity'],r['bsr_ms'],r['speedup']) for r in d['rows'] if r['N']==3072))" "$O/bsr/ab$i.json" 2>&1 | tail -c 400)"
    done
    for g in "" bf16x2; do  # the fc1 epilogue (bias + GELU) with the GELU in fp32 / bf16x2 arithmetic
      timeout 60 env VITRT_BSR_XRES_GELU=$g build-dev/bin/bsr_gemm_bench --quick --epilogue --dtypes bf16 --blocks 32,64 \
        --sparsities 0.8,0.9 --tokens 50432 --json "$O/bsr/epi_gelu$g.json" > "$O/bsr/epi_gelu$g.txt" 2>&1
      echo "SUMMARY: --epilogue, VITRT_BSR_XRES_GELU=${g:-fp32} rc=$?: $(python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print('; '.join('b%d s%.2f %.4f ms (%.2fx)'%(r['block'],r['sparsity'],r['bsr_ms'],r['speedup']) for r in d['rows'] if r['N']==3072))" "$O/bsr/epi_gelu$g.json" 2>&1 | tail -c 300)"
    done
    timeout 100 build-dev/bin/bsr_gemm_bench --quick --dtypes bf16 --blocks 16,32,64 --sparsities 0.8,0.82,0.84,0.86,0.88,0.9 \
      --tokens 50432 --iters 10 --json "$O/bsr_bf16.json" > "$O/bsr_bf16.txt" 2>&1
    echo "SUMMARY: bf16 sweep rc=$?"; sed -n '/break-even/,$p' "$O/bsr_bf16.txt"
    for v in "32" "32 VITRT_BSR_XRES_CHUNK=16" "32 VITRT_BSR_XRES_CHUNK=16 VITRT_BSR_XRES_PIPE=chunk" "64"; do
      set -- $v; tag=$(echo "$v" | tr -c 'A-Za-z0-9_\n' '_')
      timeout 100 env "${@:2}" build-dev/bin/vitrt bench --device cuda --model vit_b_16 --batch 256 --sparsity 0.9 --block $1 \
        --dtype bf16 --iters 5 --json > "$O/vit_$tag.json" 2> "$O/vit_$tag.err"
      echo "SUMMARY: vit_b_16 bs256 bf16 s0.9 block $v rc=$?: $(python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print('dense %.2f ms sparse %.2f ms speedup %.2fx (per round %.2fx), fused MLPs %s'%(d['dense_ms_per_batch'],d['sparse_ms_per_batch'],d['speedup'],d.get('speedup_median_of_rounds',0),d.get('fused_mlps')))" "$O/vit_$tag.json" 2>&1 | tail -c 300)"
    done
    BUILD_TARGETS="$targets" OUT="$O/bsr" TEST_INCLUDE='CudaBsr\.|cuda_bsr_xres|cuda_bsr_stream' TEST_TIMEOUT=150 \
      scripts/device-check.sh tests
    timeout 100 build-dev/bin/bsr_gemm_bench --sweep --blocks 16 --sparsities 0.86,0.9 --iters 5 \
      --json "$O/bsr_sweep16.json" > "$O/bsr_sweep16.txt" 2>&1
    echo "SUMMARY: block-16 variant sweep rc=$?"; grep -E "^--|best" "$O/bsr_sweep16.txt" | head -20
    ;;
  E)
    mkdir -p "$O/bsr"
    BUILD_TARGETS="$targets" OUT="$O" scripts/device-check.sh build
    timeout 60 build-dev/tests/test_cuda_bsr --gtest_filter='CudaBsr.XResident*' > "$O/xres.log" 2>&1
    echo "SUMMARY: XResident kernel, defaults: rc=$? $(grep -c Failure "$O/xres.log") failures"
    i=0
    ab() {  # ab BLOCKS "ENV ..."
      timeout 60 env $2 build-dev/bin/bsr_gemm_bench --quick --dtypes bf16 --blocks $1 --sparsities 0.8,0.86,0.9 \
        --tokens 50432 --json "$O/bsr/ab$i.json" > "$O/bsr/ab$i.txt" 2>&1
      echo "SUMMARY: A/B $i b$1 '${2:-default}' rc=$?: $(python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print('; '.join('b%d s%.2f %.4f ms (%.2fx)'%(r['block'],r['sparsity'],r['bsr_ms'],r['speedup']) for r in d['rows'] if r['N']==3072))" "$O/bsr/ab$i.json" 2>&1 | tail -c 300)"
      i=$((i + 1))
    }
    ab 16 ""
    for ch in 2 4 8; do for kb in 8 16 24; do ab 16 "VITRT_BSR_XRES_CHUNK=$ch VITRT_BSR_XRES_RING=$kb"; done; done
    ab 16 "VITRT_BSR_XRES_PIPE=1"; ab 16 "VITRT_BSR_XRES_PIPE=0"; ab 16 "VITRT_BSR_XRES=0"; ab 16 ""
    ab 32 ""; ab 32 "VITRT_BSR_XRES_RING=24"; ab 32 "VITRT_BSR_XRES_CHUNK=2 VITRT_BSR_XRES_RING=16"
    ab 32 "VITRT_BSR_XRES_CHUNK=2 VITRT_BSR_XRES_RING=24"; ab 32 "VITRT_BSR_XRES_CHUNK=1 VITRT_BSR_XRES_RING=24"; ab 32 ""
    timeout 100 build-dev/bin/bsr_gemm_bench --quick --dtypes bf16 --blocks 16,32,64 --sparsities 0.8,0.82,0.84,0.86,0.88,0.9 \
      --tokens 50432 --json "$O/bsr_bf16.json" > "$O/bsr_bf16.txt" 2>&1
    echo "SUMMARY: bf16 sweep (defaults) rc=$?"; sed -n '/break-even/,$p' "$O/bsr_bf16.txt"
    timeout 100 build-dev/bin/vitrt bench --device cuda --model vit_b_16 --batch 256 --sparsity 0.9 --block 64 \
      --dtype bf16 --iters 5 --json > "$O/vit_64.json" 2> "$O/vit_64.err"
    echo "SUMMARY: vit_b_16 bs256 bf16 s0.9 block 64 rc=$?: $(python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print('dense %.2f ms sparse %.2f ms speedup %.2fx (per round %.2fx), fused MLPs %s'%(d['dense_ms_per_batch'],d['sparse_ms_per_batch'],d['speedup'],d.get('speedup_median_of_rounds',0),d.get('fused_mlps')))" "$O/vit_64.json" 2>&1 | tail -c 300)"
    BUILD_TARGETS="$targets" OUT="$O/bsr" TEST_INCLUDE='CudaBsr\.|cuda_bsr_xres|cuda_bsr_stream' TEST_TIMEOUT=150 \
      scripts/device-check.sh tests
    ;;
  F)  # the defaults' figures for the standing table, on whatever card comes (~320 s bare)
    BUILD_TARGETS="bsr_gemm_bench test_cuda_bsr" OUT="$O" scripts/device-check.sh build
    timeout 60 build-dev/tests/test_cuda_bsr --gtest_filter='CudaBsr.XResident*:CudaBsr.VitMlp*:CudaBsr.Ragged*' > "$O/xres.log" 2>&1
    echo "SUMMARY: XResident / VitMlp / Ragged tests, defaults: rc=$? $(grep -c Failure "$O/xres.log") failures"
    timeout 100 build-dev/bin/bsr_gemm_bench --quick --dtypes bf16 --blocks 16,32,64 --sparsities 0.8,0.82,0.84,0.86,0.88,0.9 \
      --tokens 50432 --json "$O/bsr_bf16.json" > "$O/bsr_bf16.txt" 2>&1
    echo "SUMMARY: bf16 sweep (defaults) rc=$?"; sed -n '/break-even/,$p' "$O/bsr_bf16.txt"
    python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print('\n'.join('%dx%d b%d s%.2f %.4f / %.4f ms (%.2fx) %s'%(r['N'],r['K'],r['block'],r['sparsity'],r['bsr_ms'],r['dense_ms'],r['speedup'],r['variant']) for r in d['rows']))" "$O/bsr_bf16.json"
    ;;
  G)  # F on the H200, with block 32's kernel A/B (~350 s bare)
    "$0" F
    VITRT_BSR_XRES_PIPE=lean timeout 60 build-dev/tests/test_cuda_bsr --gtest_filter='CudaBsr.XResident*' > "$O/lean.log" 2>&1
    echo "SUMMARY: XResident kernel, leaner chunk loop: rc=$? $(grep -c Failure "$O/lean.log") failures"
    timeout 60 env VITRT_BSR_XRES_TMA_STORE=1 build-dev/tests/test_cuda_bsr --gtest_filter='CudaBsr.XResident*' > "$O/tma.log" 2>&1
    echo "SUMMARY: XResident kernel with TMA stores: rc=$? $(grep -c Failure "$O/tma.log") failures; $(grep -o 'peak memory bandwidth [0-9]* GB/s' "$O/tma.log")"
    for e in "" "VITRT_BSR_XRES_TMA_STORE=1" "VITRT_BSR_XRES=1" "VITRT_BSR_XRES=1 VITRT_BSR_XRES_TMA_STORE=1" "VITRT_BSR_XRES=0" \
             "VITRT_BSR_XRES=1 VITRT_BSR_XRES_CHUNK=2 VITRT_BSR_XRES_PIPE=chunk" "VITRT_BSR_XRES_PIPE=lean" \
             "VITRT_BSR_XRES_PIPE=lean VITRT_BSR_XRES_TMA_STORE=1" "VITRT_BSR_XRES=1 VITRT_BSR_XRES_PIPE=lean" ""; do
      timeout 30 env $e build-dev/bin/bsr_gemm_bench --quick --dtypes bf16 --blocks 16,32,64 --sparsities 0.8,0.86,0.9 \
        --tokens 50432 --json "$O/b32.json" > "$O/b32.txt" 2>&1
      echo "SUMMARY: fc1 '${e:-default}' rc=$?: $(python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print('; '.join('b%d s%.2f %.4f (%.2fx) %s'%(r['block'],r['sparsity'],r['bsr_ms'],r['speedup'],r['variant'][:5]) for r in d['rows'] if r['N']==3072))" "$O/b32.json" 2>&1 | tail -c 600)"
    done
    # Where block 16's ~300 clocks per block go: the tensor side alone (wgmma_rate_bench's block-sparse
    # forms), then an ncu source profile of the x-resident kernel at block 16, 90%.
    BUILD_TARGETS="wgmma_rate_bench" OUT="$O" scripts/device-check.sh build > /dev/null
    timeout 90 build-dev/bin/wgmma_rate_bench --iters 20000 > "$O/wgmma_rate.txt" 2>&1
    echo "SUMMARY: wgmma_rate_bench rc=$?"; grep -A9 "block-sparse forms" "$O/wgmma_rate.txt"
    mkdir -p "$O/ncu"
    BUILD_TARGETS="bsr_gemm_bench" OUT="$O/ncu" NCU_SRC_KERNELS=bsr_xres_kernel NCU_SRC_TOP=25 \
      NCU_SRC_CMD="build-dev/bin/bsr_gemm_bench --quick --dtypes bf16 --blocks 16 --sparsities 0.9 --tokens 50432 --iters 1 --warmup 0" \
      scripts/device-check.sh ncu-src
    ;;
  H)  # two pairs of consumer warpgroups (~300 s bare)
    BUILD_TARGETS="bsr_gemm_bench test_cuda_bsr" OUT="$O" scripts/device-check.sh build
    for e in "VITRT_BSR_XRES_PAIRS=2" "VITRT_BSR_XRES_PAIRS=2 VITRT_BSR_XRES_CHUNK=1" "VITRT_BSR_XRES_PAIRS=2 VITRT_BSR_XRES_CHUNK=2" ""; do
      timeout 90 env $e build-dev/tests/test_cuda_bsr --gtest_filter='CudaBsr.XResident*' > "$O/xres.log" 2>&1
      echo "SUMMARY: XResident kernel '${e:-default}': rc=$? $(grep -c Failure "$O/xres.log") failures; $(grep -o 'x-resident kernel: [^;]*' "$O/xres.log")"
      grep -m3 -B2 -A6 Failure "$O/xres.log" | head -30
    done
    for e in "" "VITRT_BSR_XRES_PAIRS=2" "VITRT_BSR_XRES_PAIRS=2 VITRT_BSR_XRES_CHUNK=4" "VITRT_BSR_XRES=1" "VITRT_BSR_XRES=1 VITRT_BSR_XRES_PAIRS=2" \
             "VITRT_BSR_XRES=1 VITRT_BSR_XRES_PAIRS=2 VITRT_BSR_XRES_CHUNK=2" "VITRT_BSR_XRES=1 VITRT_BSR_XRES_PIPE=chunk VITRT_BSR_XRES_CHUNK=2" ""; do
      timeout 40 env $e build-dev/bin/bsr_gemm_bench --quick --dtypes bf16 --blocks 16,32 --sparsities 0.8,0.86,0.9 \
        --tokens 50432 --json "$O/h.json" > "$O/h.txt" 2>&1
      echo "SUMMARY: '${e:-default}' rc=$?: $(python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print('; '.join('%s b%d s%.2f %.4f (%.2fx) %s'%('fc1' if r['N']==3072 else 'fc2',r['block'],r['sparsity'],r['bsr_ms'],r['speedup'],r['variant'][:13]) for r in d['rows']))" "$O/h.json" 2>&1 | tail -c 1200)"
    done
    timeout 150 env VITRT_BSR_XRES=1 VITRT_BSR_XRES_PAIRS=2 build-dev/tests/test_cuda_bsr --gtest_filter='CudaBsr.*' > "$O/all.log" 2>&1
    echo "SUMMARY: every CudaBsr test with two pairs (XRES=1): rc=$? $(grep -c Failure "$O/all.log") failures; $(tail -1 "$O/all.log")"
    ;;
  I)  # the table-driven chunk loop (~330 s bare)
    BUILD_TARGETS="$targets" OUT="$O" scripts/device-check.sh build
    for e in "" "VITRT_BSR_XRES_PIPE=tables" "VITRT_BSR_XRES_PIPE=tables VITRT_BSR_XRES_PAIRS=1" \
             "VITRT_BSR_XRES_PIPE=tables VITRT_BSR_XRES_GROUP=0" "VITRT_BSR_XRES_PIPE=tables VITRT_BSR_XRES_CHUNK=2"; do
      timeout 90 env $e build-dev/tests/test_cuda_bsr --gtest_filter='CudaBsr.XResident*' > "$O/xres.log" 2>&1
      echo "SUMMARY: XResident kernel '${e:-default}': rc=$? $(grep -c Failure "$O/xres.log") failures; $(grep -o 'x-resident kernel: [^;]*' "$O/xres.log")"
      grep -m3 -B2 -A6 Failure "$O/xres.log" | head -30
    done
    for e in "" "VITRT_BSR_XRES_PIPE=tables" "VITRT_BSR_XRES_PAIRS=1" "VITRT_BSR_XRES_PAIRS=1 VITRT_BSR_XRES_PIPE=tables" \
             "VITRT_BSR_XRES=1 VITRT_BSR_XRES_PIPE=tables VITRT_BSR_XRES_PAIRS=1" "VITRT_BSR_XRES=1 VITRT_BSR_XRES_PIPE=tables VITRT_BSR_XRES_PAIRS=1 VITRT_BSR_XRES_CHUNK=2" \
             "VITRT_BSR_XRES=1 VITRT_BSR_XRES_PIPE=tables VITRT_BSR_XRES_PAIRS=2" "VITRT_BSR_XRES=1" ""; do
      timeout 40 env $e build-dev/bin/bsr_gemm_bench --quick --dtypes bf16 --blocks 16,32,64 --sparsities 0.8,0.86,0.9 \
        --tokens 50432 --json "$O/i.json" > "$O/i.txt" 2>&1
      echo "SUMMARY: '${e:-default}' rc=$?: $(python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print('; '.join('b%d s%.2f %.4f (%.2fx) %s'%(r['block'],r['sparsity'],r['bsr_ms'],r['speedup'],r['variant'][:13]) for r in d['rows'] if r['N']==3072))" "$O/i.json" 2>&1 | tail -c 900)"
    done
    timeout 150 env VITRT_BSR_XRES=1 VITRT_BSR_XRES_PIPE=tables build-dev/tests/test_cuda_bsr --gtest_filter='CudaBsr.*' > "$O/all.log" 2>&1
    echo "SUMMARY: every CudaBsr test with the tables loop (XRES=1): rc=$? $(grep -c Failure "$O/all.log") failures; $(tail -1 "$O/all.log")"
    timeout 100 build-dev/bin/vitrt bench --device cuda --model vit_b_16 --batch 256 --sparsity 0.9 --block 64 \
      --dtype bf16 --iters 5 --json > "$O/vit_64.json" 2> "$O/vit_64.err"
    echo "SUMMARY: vit_b_16 bs256 bf16 s0.9 block 64 rc=$?: $(python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print('dense %.2f ms sparse %.2f ms speedup %.2fx (per round %.2fx)'%(d['dense_ms_per_batch'],d['sparse_ms_per_batch'],d['speedup'],d.get('speedup_median_of_rounds',0)))" "$O/vit_64.json" 2>&1 | tail -c 300)"
    ;;
  J)  # the new defaults (~330 s bare)
    BUILD_TARGETS="$targets" OUT="$O/bsr" TEST_INCLUDE='CudaBsr\.|cuda_bsr' TEST_TIMEOUT=150 scripts/device-check.sh build tests
    "$0" F | grep -v '^SUMMARY: build'
    for b in 16 32 64; do
      timeout 100 build-dev/bin/vitrt bench --device cuda --model vit_b_16 --batch 256 --sparsity 0.9 --block $b \
        --dtype bf16 --iters 5 --json > "$O/vit_$b.json" 2> "$O/vit_$b.err"
      echo "SUMMARY: vit_b_16 bs256 bf16 s0.9 block $b rc=$?: $(python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print('dense %.2f ms sparse %.2f ms speedup %.2fx (per round %.2fx)'%(d['dense_ms_per_batch'],d['sparse_ms_per_batch'],d['speedup'],d.get('speedup_median_of_rounds',0)))" "$O/vit_$b.json" 2>&1 | tail -c 300)"
    done
    ;;
  *) echo "unknown step '$step'"; describe; exit 2 ;;
esac
