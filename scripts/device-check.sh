#!/usr/bin/env bash
# One call on the GPU machine: build, run every GPU test, the GPU fidelity checks and the benchmarks,
# then print a short table. Logs go to $OUT (or ./device-out). Usage:
#   scripts/device-check.sh [tests] [sanitize] [fidelity-full] [bench] [bsr] [vit-fid] [embed-bench] [amg] [server] [attn-sweep] [attn-ab] [gemm-ab] [ncu] [ncu-src] [ncu-cmd] [store] [wgmma-rate] [decoder-ref] [compare] [anchors] [anchors-compiled] [attn-bench]
#   (default: tests bench)
# The GPU machine has no internet: Debian packages travel as .deb files in .deps/ (see
# scripts/fetch-device-deps.sh) and are unpacked into /tmp/deps; segment-anything(-fast) for the
# reference runs travel in .anchors/ (fetched public sources and a copy of
# ../shared/anchor/bench_sam_pytorch.py, never committed).
set -uo pipefail
cd "$(dirname "$0")/.."
# Logs are written to a scratch folder and packed into one archive at the end: the device tool brings
# back at most 8 files, so $OUT only gets logs.tgz and summary.txt.
FINAL_OUT=${OUT:-device-out}; mkdir -p "$FINAL_OUT"
OUT=$(mktemp -d /tmp/vitrt-device-logs.XXXX)
trap 'printf "%s\n" "${summary[@]}" > "$OUT/summary.txt"; tar -C "$OUT" -czf "$FINAL_OUT/logs.tgz" . 2>/dev/null; cp "$OUT/summary.txt" "$FINAL_OUT/" 2>/dev/null' EXIT
trap 'exit 143' TERM
stages=${*:-tests bench}
has() { [[ " $stages " == *" $1 "* ]]; }
summary=()
# Each result line is printed as it comes (a run cut short by the time limit still shows what it
# measured) and collected for the table at the end.
add_summary() { summary+=("$1"); echo "SUMMARY: $1"; }

if ! [ -f /usr/include/dnnl.hpp ]; then
  mkdir -p /tmp/deps
  for f in .deps/*.deb; do dpkg -x "$f" /tmp/deps; done
  export CMAKE_PREFIX_PATH=/tmp/deps/usr
  # (with the multiarch folder: Debian's jconfig.h lives there, and the machine's own, of another
  # libjpeg version, would otherwise pair with the .deb's library: "Wrong JPEG library version")
  export CPATH=/tmp/deps/usr/include:/tmp/deps/usr/include/x86_64-linux-gnu${CPATH:+:$CPATH}
  export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
# CUTLASS headers from the wheel in .deps/ (offline), for gemm_cutlass.cu; NO_CUTLASS=1 builds that
# file as stubs (cuBLASLt only), should it ever fail to build here.
cutlass_arg=()
if [ "${NO_CUTLASS:-0}" = 1 ]; then cutlass_arg=(-DVITRT_CUTLASS_DIR=/nonexistent)
else scripts/fetch-cutlass.sh > "$OUT/fetch-cutlass.log" 2>&1 || add_summary "CUTLASS headers: not extracted (see fetch-cutlass.log)"
fi
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
t0=$(date +%s)
cmake -S . -B build-dev -DCMAKE_BUILD_TYPE=Release -DVITRT_BUILD_PYTHON=OFF -DVITRT_CUDA_SM80=OFF "${cutlass_arg[@]}" > "$OUT/cmake.log" 2>&1 || { tail -30 "$OUT/cmake.log"; exit 1; }
# BUILD_TARGETS (e.g. "vitrt_cli bsr_gemm_bench test_cuda_bsr"): only those, when device time is short.
cmake --build build-dev -j"$(nproc)" ${BUILD_TARGETS:+--target $BUILD_TARGETS} -- -k > "$OUT/build.log" 2>&1 || grep -E "error" "$OUT/build.log" | head -20
[ -x build-dev/bin/vitrt ] || echo "vitrt did not build: CLI stages will fail"
add_summary "build: ok in $(( $(date +%s) - t0 )) s"
V=build-dev/bin/vitrt

# ATTN_GATE=1: the wgmma attention kernels' own tests first (global blocks, then windows), under a
# short time limit; if one fails (or hangs) the rest of the call runs with that kernel off
# (VITRT_ATTN_WGMMA=0 / VITRT_ATTN_WGMMA_WINDOWS=0), so one bad kernel does not cost the call.
if [ "${ATTN_GATE:-0}" = 1 ]; then
  timeout 90 build-dev/tests/test_cuda_attention --gtest_filter='CudaAttention.RelposGlobal*' > "$OUT/attn-gate.log" 2>&1
  gate=$?; [ $gate = 0 ] || export VITRT_ATTN_WGMMA=0
  add_summary "attention gate (global-attention tests): rc=$gate$([ $gate = 0 ] || echo ', VITRT_ATTN_WGMMA=0 from here on')"
  timeout 90 build-dev/tests/test_cuda_attention --gtest_filter='CudaAttention.Windowed*:CudaAttention.RelposWindows*' \
    > "$OUT/attn-gate-windows.log" 2>&1
  gate=$?; [ $gate = 0 ] || export VITRT_ATTN_WGMMA_WINDOWS=0
  add_summary "attention gate (windowed tests): rc=$gate$([ $gate = 0 ] || echo ', VITRT_ATTN_WGMMA_WINDOWS=0 from here on')"
  [ $gate = 0 ] || grep -E "Failure|FAILED|expected|max" "$OUT/attn-gate-windows.log" | head -20
fi

# compute-sanitizer over the hand-written kernels' CPU-checked tests: out-of-bounds and misaligned
# accesses (memcheck), invalid barrier use (synccheck) and shared-memory hazards (racecheck, opt-in:
# the TMA / mbarrier kernels are outside what it models) that a tolerance check can miss (a read past
# the end that happens to find zeros). SANITIZE_TOOLS: default "memcheck synccheck". SANITIZE_RUNS:
# ";"-separated runs, each "[VAR=value ...] test-binary gtest-filter"; the default covers the fused
# MLP in every form, the x-resident and streamed BSR kernels, the Hopper attention kernels and the
# LayerNorm. Each run is cut at SANITIZE_TIMEOUT seconds (default 90): the stage takes at most
# runs x tools x that.
if has sanitize; then
  CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  default_runs="test_cuda_bsr CudaBsr.FusedMlpMatchesCpu"
  default_runs+=";VITRT_BSR_MLP_WARPGROUPS=3 test_cuda_bsr CudaBsr.FusedMlpMatchesCpu"
  default_runs+=";VITRT_BSR_MLP_PIPE=0 test_cuda_bsr CudaBsr.FusedMlpMatchesCpu"
  default_runs+=";VITRT_BSR_MLP_STREAM=0 test_cuda_bsr CudaBsr.FusedMlpMatchesCpu"
  default_runs+=";test_cuda_bsr CudaBsr.XResidentKernelMatchesCpu:CudaBsr.StreamedKernelMatchesCpu:CudaBsr.RaggedBlockRowsMatchCpu"
  default_runs+=";test_cuda_attention CudaAttention.RelposGlobalSmall:CudaAttention.RelposWindowsAsBatch:CudaAttention.ShortSequences:CudaAttention.PlainAttention"
  default_runs+=";test_cuda_ops CudaOps.LayerNorm*:CudaOps.LinearEveryEpilogue:CudaOps.GemmCutlassBias"
  IFS=';' read -r -a runs <<< "${SANITIZE_RUNS:-$default_runs}"
  n=0
  for tool in ${SANITIZE_TOOLS:-memcheck synccheck}; do
    for run in "${runs[@]}"; do
      read -r -a words <<< "$run"
      envs=(); i=0
      while [[ "${words[$i]:-}" == *=* ]]; do envs+=("${words[$i]}"); i=$((i + 1)); done
      bin=${words[$i]:-}; filter=${words[$((i + 1))]:-*}
      n=$((n + 1)); log="$OUT/sanitize_${n}_${tool}_${bin}.log"
      (cd build-dev/tests && env "${envs[@]}" timeout "${SANITIZE_TIMEOUT:-90}" "$CS" --tool "$tool" --error-exitcode 99 \
        ./"$bin" --gtest_filter="$filter") > "$log" 2>&1
      rc=$?
      add_summary "sanitize $tool ${envs[*]:-default} $bin $filter: rc=$rc, $(grep -m1 -o 'ERROR SUMMARY: [0-9]* error[s]*' "$log" || echo 'no summary'), $(grep -cE '^\[       OK \]' "$log") tests ok$(grep -q SKIPPED "$log" && echo ', some skipped')"
      [ $rc = 0 ] || grep -m6 -E "Invalid|out of bounds|Race|Barrier|ERROR" "$log"
    done
  done
fi

if has tests; then
  # TEST_EXCLUDE: a ctest -E regex (e.g. cuda_attention_tile to skip the tile-override repeats);
  # TEST_INCLUDE: a ctest -R regex (only those).
  (cd build-dev && ctest -L gpu ${TEST_INCLUDE:+-R "$TEST_INCLUDE"} ${TEST_EXCLUDE:+-E "$TEST_EXCLUDE"} --output-on-failure --timeout ${TEST_TIMEOUT:-300}) > "$OUT/gpu-tests.log" 2>&1
  add_summary "gpu tests: $(grep -E 'tests passed|tests failed' "$OUT/gpu-tests.log" | tail -1)"
  grep -E "TFLOP|FAILED|Failure" "$OUT/gpu-tests.log" | head -40
  for dt in fp32 bf16; do
    tol=1e-4; [ $dt = bf16 ] && tol=1e-2
    for ref in tests/fixtures/sam/out_tiny1024_tiny.pth tests/fixtures/sam/out_interp256_portrait.pth; do
      m=$(basename "$ref" .pth | cut -d_ -f2); img=$(basename "$ref" .pth | cut -d_ -f3)
      $V fidelity-check --device cuda --dtype $dt --tol $tol --checkpoint tests/fixtures/sam/$m.pth \
        --config tests/fixtures/sam/$m.json --reference "$ref" --image tests/fixtures/sam/images/$img.png \
        > "$OUT/fid_${dt}_${m}_${img}.json" 2>&1
      add_summary "fidelity cuda $dt $m/$img: rc=$? $(python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print('emb %.2e lowres max %.2e mism %d pass %s'%(d['embedding_rel'],max(c['low_res_rel'] for c in d['cases']),sum(c['mask_mismatch'] for c in d['cases']),d['pass']))" "$OUT/fid_${dt}_${m}_${img}.json" 2>/dev/null || tail -c 300 "$OUT/fid_${dt}_${m}_${img}.json")"
    done
  done
fi

# Full-size whole-model fidelity on the GPU (issue 3): the official segment-anything code builds
# seeded vit_b/l/h models and runs its SamPredictor on three photos of different sizes (fp32, TF32
# off, on this GPU); vitrt's CUDA path is then checked against it in fp32 (1e-4) and bf16 (1e-2
# embedding, >= 99.5% mask agreement). FID_MODELS picks models (default all three).
if has fidelity-full; then
  FID=/tmp/samfid; models=${FID_MODELS:-vit_b,vit_l,vit_h}
  python3 scripts/fidelity_full.py --out $FID --device cuda --sam-src .anchors/orig --skimage-data .anchors/images \
    --models "$models" > "$OUT/fidelity_ref.log" 2>&1 || { add_summary "fidelity references: FAILED"; tail -20 "$OUT/fidelity_ref.log"; }
  # FID_DTYPES entries: fp32, bf16 (bf16 encoder, the default fp32 mask decoder), or <encoder>/<decoder>
  # (bf16/bf16: the decoder in bf16 too).
  for spec in ${FID_DTYPES:-fp32 bf16 bf16/bf16}; do
    dt=${spec%%/*}; dec=(); [[ $spec == */* ]] && dec=(--vitrt-arg=--decoder-dtype --vitrt-arg=${spec#*/})
    tol=1e-4; [ $dt = bf16 ] && tol=1e-2
    python3 scripts/fidelity_full.py --out $FID --check-only --models "$models" --sam-src .anchors/orig --vitrt "$PWD/$V" \
      --vitrt-arg=--device --vitrt-arg=cuda --vitrt-arg=--dtype --vitrt-arg=$dt --vitrt-arg=--tol --vitrt-arg=$tol \
      "${dec[@]}" > "$OUT/fidelity_cuda_${spec/\//-}.log" 2>&1
    dt=${spec/\//-}
    for m in ${models//,/ }; do
      cp "$FID/fidelity_$m.json" "$OUT/fidelity_cuda_${dt}_$m.json" 2>/dev/null
      add_summary "fidelity full cuda $dt $m: $(python3 -c "
import json,sys
d=json.load(open(sys.argv[1]))
print('; '.join('%s emb %.1e lowres %.1e agree %.5f %s'%(n,r['embedding_rel'],max(c['low_res_rel'] for c in r['cases']),
  r['min_mask_agreement'],'PASS' if r['pass'] else 'FAIL') for n,r in d.items()) or 'no results')" "$OUT/fidelity_cuda_${dt}_$m.json" 2>&1 | tail -c 400)"
    done
  done
fi

if has bench; then
  # BENCH_CONFIGS="vit_b:1 vit_h:1" narrows it.
  for cfg in ${BENCH_CONFIGS:-vit_b:1 vit_b:32 vit_h:1 vit_h:32}; do
    set -- ${cfg/:/ }
    # SM clock and board power sampled every 250 ms during the run: is the graphed timing power-bound?
    nvidia-smi --query-gpu=clocks.sm,power.draw --format=csv,noheader,nounits -lms 250 > "$OUT/smi_${1}_b$2.csv" 2>/dev/null &
    smi_pid=$!
    VITRT_GEMM_AUTOTUNE_LOG=1 $V bench --device cuda --model $1 --batch $2 --dtype bf16 --iters ${BENCH_ITERS:-10} --profile --json > "$OUT/bench_${1}_b$2.json" 2> "$OUT/bench_${1}_b$2.err"
    kill $smi_pid 2>/dev/null; wait $smi_pid 2>/dev/null
    add_summary "clocks $1 bs$2: $(python3 -c "
import sys
r=[l.split(',') for l in open(sys.argv[1]) if l.count(',')==1]
r=[(float(a),float(b)) for a,b in r if a.strip().replace('.','').isdigit()]
busy=[x for x in r if x[1]>200] or r
c=sorted(x[0] for x in busy); p=sorted(x[1] for x in busy)
print('%d samples above 200 W: SM clock median %d MHz (min %d), power median %.0f W (max %.0f)'%(len(busy),c[len(c)//2],c[0],p[len(p)//2],p[-1]))" "$OUT/smi_${1}_b$2.csv" 2>&1 | tail -c 200)"
    python3 -c "import json,sys;d=json.load(open(sys.argv[1]));p=d['profile'];print('profile %s: eager %.2f ms'%(sys.argv[2],p['eager_forward_ms']));[print('  %5.1f%% %8.3f ms %4dx %s'%(100*r['share'],r['ms'],r['calls'],r['op'])) for r in p['ops'][:12]];p=d.get('decoder_profile_64');p and print('decoder profile %s, 64 prompts on the device: %.2f ms'%(sys.argv[2],p['eager_forward_ms']));p and [print('  %5.1f%% %8.3f ms %4dx %s'%(100*r['share'],r['ms'],r['calls'],r['op'])) for r in p['ops'][:14]]" "$OUT/bench_${1}_b$2.json" "$1 bs$2" 2>/dev/null | tee -a "$OUT/profiles.txt"
    add_summary "vitrt $1 bs$2 bf16: $(python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print('%.1f img/s, %.2f ms/batch (eager %.2f, graph again %.2f; replays %s), %.1f TFLOP/s, peak %.2f GiB, dec ms/prompt %s'%(d['images_per_s'],d['encoder_ms_per_batch'],d.get('encoder_eager_ms_per_batch',0),d.get('encoder_replay_after_eager_ms_per_batch',0),' '.join('%.1f'%t for t in d.get('encoder_replay_ms',[])),d['encoder_tflops'],d['peak_device_gib'],d['decoder_ms_per_prompt']))" "$OUT/bench_${1}_b$2.json" 2>/dev/null || tail -c 400 "$OUT/bench_${1}_b$2.err")"
    # The GEMM autotuner's decisions for this model (first eager calls), from the run's stderr.
    grep -h "GEMM autotune" "$OUT/bench_${1}_b$2.err" 2>/dev/null | sed "s/^/  $1 bs$2 /" | tee -a "$OUT/gemm_autotune.txt" | head -20
    # BENCH_AB_ENV="VAR=value[;VAR2=value2...]": the same encoder timing again with each setting (A/B in one run).
    IFS=';' read -ra ab_settings <<< "${BENCH_AB_ENV:-}"
    for ab in "${ab_settings[@]}"; do
      [ -n "$ab" ] || continue
      tag=$(echo "$ab" | tr -c 'A-Za-z0-9_.,\n' '_')
      env "$ab" $V bench --device cuda --model $1 --batch $2 --dtype bf16 --iters ${BENCH_ITERS:-10} --no-decoder --json \
        > "$OUT/bench_${1}_b$2_ab_$tag.json" 2> "$OUT/bench_${1}_b$2_ab_$tag.err"
      add_summary "vitrt $1 bs$2 bf16 with $ab: $(python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print('%.1f img/s, %.2f ms/batch, peak %.2f GiB'%(d['images_per_s'],d['encoder_ms_per_batch'],d['peak_device_gib']))" "$OUT/bench_${1}_b$2_ab_$tag.json" 2>/dev/null || tail -c 400 "$OUT/bench_${1}_b$2_ab_$tag.err")"
    done
  done
fi

# Block-sparse GEMMs (issue 4): the micro-benchmark (checks every config against dense on the folded
# weights; exits 1 on a mismatch), PyTorch's BSR path on the same shapes, and ViT-B/16 end to end.
if has bsr; then
  q=${BSR_QUICK---quick}
  if [ "${BSR_SWEEP:-1}" = 1 ]; then  # every compiled bf16 variant on the ViT-B shapes; best per config
    timeout 240 build-dev/bin/bsr_gemm_bench --sweep --json "$OUT/bsr_sweep.json" > "$OUT/bsr_sweep.txt" 2>&1
    add_summary "bsr sweep rc=$?: $(grep -E ': best' "$OUT/bsr_sweep.txt" | tr '\n' ';' | tail -c 1200)"
  fi
  if [ "${BSR_MAIN:-1}" = 1 ]; then  # the micro-benchmark against cuBLASLt (BSR_MAIN=0 skips; BSR_PY compares with it)
    timeout 240 build-dev/bin/bsr_gemm_bench $q --json "$OUT/bsr_gemm_bench.json" > "$OUT/bsr_gemm_bench.txt" 2>&1
    add_summary "bsr_gemm_bench rc=$?: $(grep -E 'MET|MISSED|break-even' "$OUT/bsr_gemm_bench.txt" | tr '\n' ';' | tail -c 900)"
  fi
  # BSR_AB_ENV="VAR=value[ VAR2=value];...": the bf16 micro-benchmark again with each setting (e.g.
  # "VITRT_BSR_XRES=1;VITRT_BSR_XRES=1 VITRT_GEMM_AUTOTUNE=0").
  IFS=';' read -ra bsr_ab <<< "${BSR_AB_ENV:-}"
  for ab in "${bsr_ab[@]}"; do
    [ -n "$ab" ] || continue
    tag=$(echo "$ab" | tr -c 'A-Za-z0-9_.,\n' '_')
    timeout 180 env $ab build-dev/bin/bsr_gemm_bench $q --dtypes bf16 --json "$OUT/bsr_ab_$tag.json" > "$OUT/bsr_ab_$tag.txt" 2>&1
    add_summary "bsr_gemm_bench bf16 with $ab rc=$?: $(python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print('; '.join('%dx%d b%d s%.1f: %.2fx (%.4f/%.4f ms)'%(r['N'],r['K'],r['block'],r['sparsity'],r['speedup'],r['dense_ms'],r['bsr_ms']) for r in d['rows']))" "$OUT/bsr_ab_$tag.json" 2>&1 | tail -c 900)"
  done
  # The same bf16 shapes with the ViT MLP's epilogues on both sides (fc1 bias + GELU, fc2 bias + residual).
  if [ "${BSR_EPILOGUE:-1}" = 1 ]; then
    timeout 180 build-dev/bin/bsr_gemm_bench $q --dtypes bf16 --epilogue --json "$OUT/bsr_gemm_bench_epi.json" > "$OUT/bsr_gemm_bench_epi.txt" 2>&1
    add_summary "bsr_gemm_bench --epilogue rc=$?: $(python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print('; '.join('%dx%d b%d s%.1f %s: %.2fx (%.4f/%.4f ms)'%(r['N'],r['K'],r['block'],r['sparsity'],r['epilogue'],r['speedup'],r['dense_ms'],r['bsr_ms']) for r in d['rows']))" "$OUT/bsr_gemm_bench_epi.json" 2>&1 | tail -c 900)"
  fi
  # Whole MLPs (BSR_MLP=0 skips): dense vs two block-sparse linears vs the fused kernel, ViT-B and ViT-S sizes;
  # BSR_MLP_AB_ENV="VAR=value[ VAR2=value];...": again with each setting (e.g. VITRT_BSR_MLP_STREAM=1).
  if [ "${BSR_MLP:-1}" = 1 ]; then
    IFS=';' read -ra mlp_ab <<< ";${BSR_MLP_AB_ENV:-}"
    for ab in "${mlp_ab[@]}"; do
      tag=$(echo "$ab" | tr -c 'A-Za-z0-9_.,\n' '_'); [ -n "$ab" ] && tag="_ab_$tag"
      timeout 180 env $ab build-dev/bin/bsr_gemm_bench --mlp --blocks 64 --sparsities ${BSR_MLP_SPARSITIES:-0.8,0.9} --tokens 50432 \
        --json "$OUT/bsr_mlp$tag.json" > "$OUT/bsr_mlp$tag.txt" 2>&1
      add_summary "bsr_gemm_bench --mlp ${ab:+with $ab }rc=$?: $(python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print('; '.join('%dx%d b%d s%.2f: dense %.4f, 2 linears %.4f (%.2fx), fused %s'%(r['D'],r['H'],r['block'],r['sparsity'],r['dense_ms'],r['two_linears_ms'],r['dense_ms']/r['two_linears_ms'],'%.4f (%.2fx) err %.1e'%(r['fused_ms'],r['dense_ms']/r['fused_ms'],r['fused_vs_two_linears_rel_err']) if r['fused_ms'] else '-') for r in d['rows']))" "$OUT/bsr_mlp$tag.json" 2>&1 | tail -c 900)"
    done
  fi
  if [ "${BSR_PY:-1}" = 1 ]; then
    timeout 300 python3 bench/bsr_vs_pytorch.py $q --json "$OUT/bsr_vs_pytorch.json" --compare "$OUT/bsr_gemm_bench.json" \
      > "$OUT/bsr_vs_pytorch.txt" 2>&1; add_summary "bsr_vs_pytorch rc=$?"
    tail -40 "$OUT/bsr_vs_pytorch.txt"
  fi
  # PyTorch's dense ViT-B/16 (eager and compiled) in the same run: the sparse model must beat it (VIT_REF=0 skips).
  if [ "${VIT_REF:-1}" = 1 ]; then
    timeout 300 python3 bench/vit_reference.py --batch 256 --dtype bf16 --compile ${VIT_COMPILE:-default} \
      > "$OUT/vit_reference.txt" 2>&1
    add_summary "torchvision vit_b_16 bf16 bs256: $(grep RESULT "$OUT/vit_reference.txt" | cut -c8- | tr '\n' ' ' || tail -3 "$OUT/vit_reference.txt")"
  fi
  # VIT_AB_ENV="VAR=value[ VAR2=value][;...]": ViT-B/16 bf16 again with each setting (e.g. VITRT_ATTN_TILE=1x32).
  IFS=';' read -ra vit_ab <<< "${VIT_AB_ENV:-}"
  for ab in "${vit_ab[@]}"; do
    [ -n "$ab" ] || continue
    tag=$(echo "$ab" | tr -c 'A-Za-z0-9_.,\n' '_')
    env $ab $V bench --device cuda --model vit_b_16 --batch 256 --sparsity 0.9 --block 64 --dtype bf16 --iters 5 --json \
      > "$OUT/vit_b_16_ab_$tag.json" 2> "$OUT/vit_b_16_ab_$tag.err"
    add_summary "vit_b_16 bf16 with $ab: $(python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print('dense %.2f ms sparse %.2f ms speedup %.2fx (per round %.2fx), %s MLPs fused, density computed %.4f'%(d['dense_ms_per_batch'],d['sparse_ms_per_batch'],d['speedup'],d.get('speedup_median_of_rounds',0),d.get('fused_mlps'),d.get('mlp_density_computed',0)))" "$OUT/vit_b_16_ab_$tag.json" 2>/dev/null || tail -c 300 "$OUT/vit_b_16_ab_$tag.err")"
  done
  # VIT_SMALL_BATCHES="1 32": ViT-B/16 bf16 at those batch sizes, default against VITRT_BSR_MLP_FUSED=0
  # and =1 (ops::mlp_bsr fuses only where the fused kernel's units fill the GPU: this checks that rule).
  for b in ${VIT_SMALL_BATCHES:-}; do
    for ab in "" "VITRT_BSR_MLP_FUSED=0" "VITRT_BSR_MLP_FUSED=1"; do
      tag=$(echo "b$b$ab" | tr -c 'A-Za-z0-9_.,\n' '_')
      env $ab $V bench --device cuda --model vit_b_16 --batch $b --sparsity 0.9 --block 64 --dtype bf16 --iters 20 --json \
        > "$OUT/vit_b_16_$tag.json" 2> "$OUT/vit_b_16_$tag.err"
      add_summary "vit_b_16 bf16 batch $b ${ab:-default}: $(python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print('dense %.3f ms sparse %.3f ms speedup %.2fx, %s MLPs fused'%(d['dense_ms_per_batch'],d['sparse_ms_per_batch'],d['speedup'],d.get('fused_mlps')))" "$OUT/vit_b_16_$tag.json" 2>/dev/null || tail -c 300 "$OUT/vit_b_16_$tag.err")"
    done
  done
  # Graph replays timed with events (eager event times alongside); bf16 also profiles one eager dense
  # and one eager sparse forward per operator (top 10 of each to the log and profiles.txt).
  for dt in ${VIT_DTYPES:-bf16 fp32}; do
    prof=""; [ $dt = bf16 ] && prof=--profile
    $V bench --device cuda --model vit_b_16 --batch 256 --sparsity 0.9 --block 64 --dtype $dt --iters 5 $prof --json \
      > "$OUT/vit_b_16_$dt.json" 2> "$OUT/vit_b_16_$dt.err"
    add_summary "vit_b_16 cuda $dt bs256 s0.9 b64: $(python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print('dense %.1f img/s (%.2f ms) sparse %.1f img/s (%.2f ms) speedup %.2fx (per round %.2fx), MLP density %.4f computed %.4f, cuda_graph %s; eager dense %.2f sparse %.2f ms (%.2fx, per round %.2fx)%s'%(d['dense_images_per_s'],d['dense_ms_per_batch'],d['sparse_images_per_s'],d['sparse_ms_per_batch'],d['speedup'],d.get('speedup_median_of_rounds',0),d.get('mlp_density',0),d.get('mlp_density_computed',0),d.get('cuda_graph'),d.get('dense_eager_ms_per_batch',0),d.get('sparse_eager_ms_per_batch',0),d.get('eager_speedup',0),d.get('eager_speedup_median_of_rounds',0),' NOTE '+d['cuda_graph_note'][:300] if 'cuda_graph_note' in d else ''))" "$OUT/vit_b_16_$dt.json" 2>/dev/null || tail -c 300 "$OUT/vit_b_16_$dt.err")"
    [ -n "$prof" ] && python3 -c "import json,sys;d=json.load(open(sys.argv[1]));[print('vit_b_16 %s %s: eager %.2f ms (%.2f ms in ops)'%(sys.argv[2],k[8:],d[k]['eager_forward_ms'],d[k]['ops_ms'])) or [print('  %5.1f%% %8.3f ms %4dx %s'%(100*r['share'],r['ms'],r['calls'],r['op'])) for r in d[k]['ops'][:10]] for k in ('profile_dense','profile_sparse') if k in d]" \
      "$OUT/vit_b_16_$dt.json" "$dt bs256" 2>/dev/null | tee -a "$OUT/profiles.txt"
  done
fi

# Segment everything on the GPU (issue 5): vit_h random weights, 32x32 grid, no crops.
# AMG_QUICK=1: only the 640x480 timing (no filters-off case, no reference run unless AMG_REF=1).
# AMG_DECODER_DTYPE (old name) = one entry of AMG_DECODER_DTYPES.
# Full-size ViT-B/16 against torchvision's own model (issue 4's bar: fp32 logits within 1e-4, bf16
# top-1 identical on >= 99% of the images): scripts/fidelity_vit.py, VIT_FID_IMAGES images (100).
if has vit-fid; then
  timeout 400 python3 scripts/fidelity_vit.py --out /tmp/vitfid --vitrt $V --images ${VIT_FID_IMAGES:-100} \
    > "$OUT/fidelity_vit.txt" 2>&1
  add_summary "vit_b_16 vs torchvision rc=$?: $(grep -E '^(fp32|bf16):' "$OUT/fidelity_vit.txt" | tr '\n' ';' | tail -c 1200)$(grep -q RESULT "$OUT/fidelity_vit.txt" || tail -c 400 "$OUT/fidelity_vit.txt")"
fi

# embed-bench: `vitrt embed` (batches EMBED_BATCH, encoder threads EMBED_WORKERS) over EMBED_IMAGES (default 512) generated JPEGs of mixed sizes (1500x1000 and
# 1024x768 photos-like noise) with a seeded random vit_b checkpoint made by the reference code
# (.anchors/orig): the whole pipeline (reader threads, GPU preprocessing, batches of EMBED_BATCH, file
# writes) against the encoder's own rate in the same run.
if has embed-bench; then
  EB=/tmp/embedbench; rm -rf $EB; mkdir -p $EB/img
  python3 - "$EB" "${EMBED_IMAGES:-512}" > "$OUT/embed_bench_setup.log" 2>&1 <<'PY'
import sys, numpy as np, torch
sys.path.insert(0, '.anchors/orig')
from segment_anything import sam_model_registry
from PIL import Image
out, n = sys.argv[1], int(sys.argv[2])
torch.manual_seed(0)
torch.save(sam_model_registry['vit_b']().state_dict(), out + '/vit_b_random.pth')
rng = np.random.default_rng(0)
base = [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for (h, w) in ((1000, 1500), (768, 1024))]
with open(out + '/list.txt', 'w') as f:
    for i in range(n):
        p = '%s/img/%05d.jpg' % (out, i)
        Image.fromarray(np.roll(base[i % 2], i, axis=1)).save(p, quality=90)
        f.write(p + '\n')
print('made', n, 'images')
PY
  for b in ${EMBED_BATCH:-32}; do for w in ${EMBED_WORKERS:-2}; do
    rm -rf $EB/out_$b
    timeout 300 $V embed --checkpoint $EB/vit_b_random.pth --image $EB/list.txt --out $EB/out_$b --device cuda --dtype bf16 \
      --batch $b --workers $w > "$OUT/embed_bench_${b}_$w.txt" 2> "$OUT/embed_bench_${b}_$w.err"
    add_summary "embed pipeline vit_b bf16 batch $b, $w workers rc=$?: $(tail -1 "$OUT/embed_bench_${b}_$w.txt") $(tail -c 300 "$OUT/embed_bench_setup.log" | grep -v made)"
  done; done
fi

if has amg; then
  # AMG_DECODER_DTYPES="bf16 fp32": the 640x480 timing once per decoder dtype (default: the model's).
  for img in 640x480 $([ "${AMG_QUICK:-0}" = 1 ] || echo 2250x1500); do for ddt in ${AMG_DECODER_DTYPES:-${AMG_DECODER_DTYPE:-default}}; do
    [ $img = 640x480 ] || [ $ddt = default ] || continue
    $V everything --random-weights vit_h --device cuda --dtype bf16 --random-image $img --bench 10 \
      $([ $ddt = default ] || echo --decoder-dtype $ddt) \
      > "$OUT/everything_vit_h_${img}_$ddt.json" 2> "$OUT/everything_vit_h_${img}_$ddt.err"
    add_summary "everything vit_h bf16 (decoder $ddt) $img: $(python3 -c "import json,sys;d=json.load(open(sys.argv[1]));m=d['median_ms'];print('total %.1f ms (encoder %.1f, decoder+filters %.1f, nms+rle %.2f, records %.2f), %d masks'%(m['total'],m['encoder'],m['decoder_and_filters'],m['nms_and_rle'],m['records'],d['masks']))" "$OUT/everything_vit_h_${img}_$ddt.json" 2>/dev/null || tail -c 300 "$OUT/everything_vit_h_${img}_$ddt.err")"
    python3 -c "import json,sys;d=json.load(open(sys.argv[1]));r=sorted(d.get('profile_one_run',[]),key=lambda e:-e['ms']);print('amg profile %s: %.1f ms in operators'%(sys.argv[2],sum(e['ms'] for e in r)));[print('  %8.3f ms %4dx %s'%(e['ms'],e['calls'],e['op'])) for e in r[:14]]" \
      "$OUT/everything_vit_h_${img}_$ddt.json" "$img decoder $ddt" 2>/dev/null | tee -a "$OUT/profiles.txt"
  done; done
  [ "${AMG_QUICK:-0}" = 1 ] && amg_full=0 || amg_full=1
fi
if has amg && [ $amg_full = 1 ]; then
  # The worst case for the post-processing: every mask survives the filters.
  $V everything --random-weights vit_h --device cuda --dtype bf16 --random-image 640x480 --bench 5 \
    --pred-iou-thresh 0 --stability-score-thresh 0 > "$OUT/everything_vit_h_nofilter.json" 2> "$OUT/everything_vit_h_nofilter.err"
  add_summary "everything vit_h bf16 640x480 filters off: $(tr -d '\n ' < "$OUT/everything_vit_h_nofilter.json" | grep -o '"median_ms":{[^}]*}\|"masks":[0-9]*' | tr '\n' ' ') $(tail -c 200 "$OUT/everything_vit_h_nofilter.err")"
fi
# segment-anything-fast's generator, same model size, image size and settings, same run (with the
# full amg stage, or AMG_REF=1 next to AMG_QUICK=1).
if has amg && { [ $amg_full = 1 ] || [ "${AMG_REF:-0}" = 1 ]; }; then
  ANCHOR_DIR=.anchors timeout 300 python3 bench/amg_gpu_reference.py --model vit_h --size 640x480 --runs 3 \
    > "$OUT/amg_reference.txt" 2>&1
  add_summary "sam-fast generator vit_h bf16 640x480: $(grep RESULT "$OUT/amg_reference.txt" | tail -1 || tail -3 "$OUT/amg_reference.txt")"
fi

# The server on the GPU (issue 6): one client clicking (latency of one click on a cached embedding),
# then 64 clients for 30 s (throughput, p50/p99, errors, resident memory).
if has server; then
  for c in 1 64; do
    timeout 120 python3 bench/load_test.py --vitrt "$PWD/$V" --random-weights vit_b --server-arg=--device \
      --server-arg=cuda --server-arg=--dtype --server-arg=bf16 ${SERVER_DECODER_DTYPE:+--server-arg=--decoder-dtype --server-arg=$SERVER_DECODER_DTYPE} \
      --clients $c --duration ${SERVER_SECONDS:-20} \
      --warmup 3 --json "$OUT/load_$c.json" > "$OUT/load_$c.txt" 2>&1
    add_summary "server cuda bf16 vit_b, $c client(s): rc=$? $(tail -c 600 "$OUT/load_$c.json" 2>/dev/null | tr -d '\n ' || tail -5 "$OUT/load_$c.txt")"
  done
fi

# Attention tile sweep (VITRT_ATTN_TILE, see attention.cu): per-operator profile of one eager forward.
if has attn-sweep; then
  # SWEEP_MODELS, SWEEP_BATCH, SWEEP_ITERS, SWEEP_TILES (a tile, or <global>,<windowed>) narrow it.
  sb=${SWEEP_BATCH:-32}
  for m in ${SWEEP_MODELS:-vit_b vit_h}; do for t in ${SWEEP_TILES:-1x32 1x64 2x64 1x32w8 1x64w8 1x32w8r 1x32w8r2 1x32w8rx2}; do
    VITRT_ATTN_TILE=$t $V bench --device cuda --model $m --batch $sb --dtype bf16 --iters ${SWEEP_ITERS:-3} --no-decoder \
      --profile --json > "$OUT/sweep_${m}_b${sb}_$t.json" 2>/dev/null
    add_summary "attn tile $t $m bs$sb: $(python3 -c "
import json,sys
d=json.load(open(sys.argv[1]));p=d['profile']['ops']
g=sum(r['ms'] for r in p if 'global' in r['op']);w=sum(r['ms'] for r in p if 'windowed' in r['op'])
print('%.1f img/s, %.2f ms/batch; eager global %.2f ms, windowed %.2f ms'%(d['images_per_s'],d['encoder_ms_per_batch'],g,w))" "$OUT/sweep_${m}_b${sb}_$t.json" 2>&1 | tail -c 200)"
  done; done
fi

# The Hopper global-attention kernel's variants (VITRT_ATTN_WGMMA) on the encoder at batch 32: img/s
# and the global blocks' attention time from one eager profile each. ATTN_AB_VARIANTS / ATTN_AB_MODELS;
# ATTN_AB_VAR: the variable the variants set (default VITRT_ATTN_WGMMA; e.g. VITRT_ATTN_WGMMA_WINDOWS).
if has attn-ab; then
  for m in ${ATTN_AB_MODELS:-vit_b vit_h}; do for v in ${ATTN_AB_VARIANTS:-default wg2 0}; do
    env ${ATTN_AB_VAR:-VITRT_ATTN_WGMMA}=$([ $v = default ] || echo $v) timeout 120 $V bench --device cuda --model $m --batch 32 --dtype bf16 \
      --iters ${BENCH_ITERS:-5} --no-decoder --profile --json > "$OUT/attn_ab_${m}_$v.json" 2> "$OUT/attn_ab_${m}_$v.err"
    add_summary "attention variant $v, $m bs32: $(python3 -c "
import json,sys
d=json.load(open(sys.argv[1]));p=d['profile']['ops']
g=sum(r['ms'] for r in p if 'global' in r['op']);w=sum(r['ms'] for r in p if 'windowed' in r['op'])
print('%.1f img/s; eager global %.2f ms, windowed %.2f ms'%(d['images_per_s'],g,w))" "$OUT/attn_ab_${m}_$v.json" 2>&1 | tail -c 200)"
  done; done
fi

# gemm-ab: the encoder at batch 32 with the bias (+ GELU) GEMMs on cuBLASLt (0) and on CUTLASS's
# configs (VITRT_GEMM_CUTLASS, GEMM_AB_CONFIGS; "default" = unset): img/s, and the lin1 + GELU, bias-only (qkv) and
# + residual (proj, lin2) times of one eager profile. GEMM_AB_MODELS.
if has gemm-ab; then
  for m in ${GEMM_AB_MODELS:-vit_b vit_h}; do for v in 0 ${GEMM_AB_CONFIGS:-default}; do
    gemm_env=(VITRT_GEMM_CUTLASS=$v); [ "$v" = default ] && gemm_env=()
    env "${gemm_env[@]}" timeout 120 $V bench --device cuda --model $m --batch 32 --dtype bf16 --iters ${BENCH_ITERS:-5} \
      --no-decoder --profile --json > "$OUT/gemm_ab_${m}_$v.json" 2> "$OUT/gemm_ab_${m}_$v.err"
    add_summary "VITRT_GEMM_CUTLASS=$v, $m bs32: $(python3 -c "
import json,sys
d=json.load(open(sys.argv[1]));p=d['profile']['ops']
lin=[r for r in p if r['op'].startswith('linear')]
g=sum(r['ms'] for r in lin if 'gelu' in r['op']);r_=sum(r['ms'] for r in lin if '+=' in r['op'])
b=sum(r['ms'] for r in lin if 'gelu' not in r['op'] and '+=' not in r['op'])
print('%.1f img/s; eager linear + gelu %.2f ms, bias-only %.2f ms, + residual %.2f ms'%(d['images_per_s'],g,b,r_))" "$OUT/gemm_ab_${m}_$v.json" 2>&1 | tail -c 200)"
  done; done
fi

# attn-bench: the attention kernels alone at vit_b / vit_h shapes (test_cuda_attention's timing section,
# whose output ctest hides), once per ATTN_BENCH_ENV setting (';'-separated, "" = defaults), e.g.
# ATTN_BENCH_ENV=";VITRT_ATTN_WGMMA_WINDOWS=onepass;VITRT_ATTN_WGMMA_WINDOWS=0".
if has attn-bench; then
  IFS=';' read -ra attn_settings <<< "${ATTN_BENCH_ENV-}"
  [ ${#attn_settings[@]} -gt 0 ] || attn_settings=("")
  for ab in "${attn_settings[@]}"; do
    tag=$(echo "${ab:-default}" | tr -c 'A-Za-z0-9_.,\n' '_')
    env ${ab:+"$ab"} timeout 60 build-dev/tests/test_cuda_attention --gtest_filter='CudaAttentionBench.*' \
      > "$OUT/attn_bench_$tag.txt" 2>&1
    add_summary "attention bench (${ab:-defaults}): $(grep -E 'bf16 (windowed variant|global).*, rel |self-attention' "$OUT/attn_bench_$tag.txt" |
      sed -E 's/ +/ /g; s/bf16 //; s/ x 64x64 grid \(pad 70\)//' | tr '\n' ';' | tail -c 600)"
  done
fi

# Per-kernel hardware counters of the bf16 attention kernels (window, window, global of vit_b).
# NCU_MODEL / NCU_BATCH (default vit_b, 8): the first 3 attention launches (windowed, windowed, global
# for vit_b; all windowed for vit_h, whose first global block is the 8th).
# NCU_KERNELS: a kernel-name regex (default the attention kernel); NCU_DECODER=1 also runs the decoder
# benchmarks (e.g. NCU_KERNELS="conv_transpose2x2_mma|upscale_crop_resize|layer_norm_rows" NCU_DECODER=1).
if has ncu; then
  timeout 240 ncu --clock-control none -k "regex:${NCU_KERNELS:-flash_mma_kernel}" --launch-count ${NCU_COUNT:-3} \
    --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats \
    --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section SchedulerStats \
    --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
    $V bench --device cuda --model ${NCU_MODEL:-vit_b} --batch ${NCU_BATCH:-8} --dtype bf16 --iters 1 --warmup 1 \
    $([ "${NCU_DECODER:-0}" = 1 ] || echo --no-decoder) > "$OUT/ncu.txt" 2>&1
  grep -E "^  [a-z_].*\(|Throughput|Registers Per|Achieved Occ|Theoretical Occ|Block Limit|Duration|Warp Cycles Per Issued|Hit Rate|Executed Ipc|Stall|Issue Slots|Eligible|stalled_.* +[0-9.]+[1-9]" "$OUT/ncu.txt" | head -160
fi

# ncu-cmd: the same counters for any command (NCU_CMD, e.g. "build-dev/bin/bsr_gemm_bench --dtypes bf16
# --blocks 32 --sparsities 0.9 --iters 1 --warmup 0"), kernels matching NCU_KERNELS, NCU_COUNT launches.
if has ncu-cmd; then
  timeout 240 ncu --clock-control none -k "regex:${NCU_KERNELS:-bsr_tc_kernel}" --launch-count ${NCU_COUNT:-2} \
    --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats \
    --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section SchedulerStats \
    --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
    ${NCU_CMD:?NCU_CMD is required for ncu-cmd} > "$OUT/ncu_cmd.txt" 2>&1
  grep -E "^  [a-z_].*\(|Throughput|Registers Per|Achieved Occ|Theoretical Occ|Block Limit|Duration|Warp Cycles Per Issued|Hit Rate|Executed Ipc|Stall|Issue Slots|Eligible|stalled_.* +[0-9.]+[1-9]" "$OUT/ncu_cmd.txt" | head -120
fi

# Per-SASS-instruction warp-stall samples of one kernel launch (NCU_SRC_KERNELS / NCU_SRC_MODEL, by
# default NCU_KERNELS / NCU_MODEL; NCU_BATCH):
# the report is kept ($OUT/ncu_src.ncu-rep) and its source page printed as CSV; the summary lists the
# instructions with the most samples (scripts/ncu_source_top.py). NCU_SRC_CMD: profile that command instead of
# `vitrt bench`.
if has ncu-src; then
  # NCU_SRC_AB_ENV="VAR=value[ VAR2=value];...": the same profile again under each setting (files with the
  # setting in their names), e.g. the fused MLP's forms.
  IFS=';' read -ra src_ab <<< ";${NCU_SRC_AB_ENV:-}"
  for ab in "${src_ab[@]}"; do
    tag=$(echo "$ab" | tr -c 'A-Za-z0-9_.,\n' '_'); [ -n "$ab" ] && tag="_ab_$tag"
    timeout 240 env $ab ncu --clock-control none -k "regex:${NCU_SRC_KERNELS:-${NCU_KERNELS:-flash_mma_kernel}}" --launch-count 1 \
      --section SourceCounters --section WarpStateStats --section SpeedOfLight --section Occupancy --section LaunchStats \
      --section SchedulerStats -f -o "$OUT/ncu_src$tag" \
      ${NCU_SRC_CMD:-$V bench --device cuda --model ${NCU_SRC_MODEL:-${NCU_MODEL:-vit_b}} --batch ${NCU_BATCH:-8} --dtype bf16 --iters 1 --warmup 1 \
      --no-decoder} > "$OUT/ncu_src$tag.log" 2>&1
    timeout 120 ncu --import "$OUT/ncu_src$tag.ncu-rep" --page source --print-source sass --csv > "$OUT/ncu_source$tag.csv" 2>&1
    timeout 60 ncu --import "$OUT/ncu_src$tag.ncu-rep" --page details > "$OUT/ncu_src_details$tag.txt" 2>&1
    python3 scripts/ncu_source_top.py "$OUT/ncu_source$tag.csv" --top ${NCU_SRC_TOP:-20} > "$OUT/ncu_source_top$tag.txt" 2>&1
    cat "$OUT/ncu_source_top$tag.txt"
    add_summary "ncu source page${ab:+ with $ab}: $(wc -l < "$OUT/ncu_source$tag.csv") lines (ncu_source$tag.csv; top stalls in ncu_source_top$tag.txt): $(sed -n 3p "$OUT/ncu_source_top$tag.txt")"
  done
fi

# wgmma-rate: the tensor-core rate of single wgmma shapes, one CTA per SM (bench/wgmma_rate_bench.cu).
if has wgmma-rate; then
  timeout 120 build-dev/bin/wgmma_rate_bench ${WGMMA_RATE_ARGS:-} > "$OUT/wgmma_rate.txt" 2>&1
  cat "$OUT/wgmma_rate.txt"
  add_summary "wgmma rates (FLOP/clk/SM of 4096): $(grep -E '^m64' "$OUT/wgmma_rate.txt" | awk '{printf "%s %s %s %s; ", $1, $2, $3, $8}' | tail -c 700)"
fi

# store: the write rate of a layer output in each BSR kernel's store order (bench/store_pattern_bench.cu).
if has store; then
  build-dev/bin/store_pattern_bench > "$OUT/store_pattern.txt" 2>&1
  cat "$OUT/store_pattern.txt"
  add_summary "store patterns: $(tail -n +2 "$OUT/store_pattern.txt" | awk '{for (i = 2; i <= NF; i++) if ($i == "ms") {n = $1; for (j = 2; j < i - 1; j++) n = n " " $j; printf "%s %s ms; ", n, $(i-1)}}')"
fi

# segment-anything-fast's batched decoder path (predict_torch with N prompts), same points as vitrt bench.
if has decoder-ref; then
  for m in ${DEC_MODELS:-vit_b vit_h}; do
    ANCHOR_DIR=.anchors timeout 200 python3 bench/decoder_reference.py --model $m > "$OUT/decoder_ref_$m.txt" 2>&1
    add_summary "sam-fast batched decoder $m bf16: $(grep RESULT "$OUT/decoder_ref_$m.txt" | tail -1 || tail -3 "$OUT/decoder_ref_$m.txt")"
  done
fi

# vitrt and segment-anything-fast (eager at batch 1, compiled above) on the same configurations, with
# the ratios and the issue's targets in one table (bench/sam_vs_reference.py; ~10 min with vit_h).
if has compare; then
  timeout ${COMPARE_TIMEOUT:-560} python3 bench/sam_vs_reference.py --vitrt "$PWD/$V" --anchor-dir .anchors \
    --configs "${COMPARE_CONFIGS:-vit_b:1,vit_b:32,vit_h:1,vit_h:32}" --json "$OUT/compare.json" \
    > "$OUT/compare.txt" 2> "$OUT/compare.err"
  cat "$OUT/compare.txt"
  add_summary "compare (bench/sam_vs_reference.py): $(grep -c '^| encoder\|^| decoder' "$OUT/compare.txt") rows, see compare.txt"
fi

anchor() {  # model bs compile
  ANCHOR_DIR=.anchors timeout 400 python3 .anchors/bench_sam_pytorch.py --impl fast --model $1 --bs $2 --dtype bf16 \
    --compile $3 --iters 10 --decoder 2>&1 | tee "$OUT/anchor_${1}_b$2_$3.log" | grep RESULT | tail -1
}
if has anchors; then
  for cfg in "vit_b 1" "vit_b 32" "vit_h 32"; do set -- $cfg; add_summary "sam-fast eager $1 bs$2: $(anchor $1 $2 none)"; done
fi
# ANCHOR_CONFIGS="vit_b:32" narrows it (default vit_b:32 vit_h:32).
if has anchors-compiled; then
  for cfg in ${ANCHOR_CONFIGS:-vit_b:32 vit_h:32}; do set -- ${cfg/:/ }; add_summary "sam-fast compiled $1 bs$2: $(anchor $1 $2 default)"; done
fi

echo; echo "==== summary ===="; printf '%s\n' "${summary[@]}" | tee "$OUT/summary.txt"
