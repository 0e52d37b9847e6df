#include "ops/cuda/conv_transpose.h"

#include <algorithm>
#include <cstdint>

#include "ops/cuda/elementwise.h"
#include "ops/cuda/ptx.cuh"
#include "ops/cuda/runtime.h"

namespace vitrt::cuda {
namespace {

using bf16 = __nv_bfloat16;

// ConvTranspose2d(k=2, s=2) as one GEMM with its scatter in the epilogue:
//   D[m, n] = sum_k X[m, k] Wt[n, k],  m = input pixel (b, iy, ix), n = tap * Cout + co,
//   out[b, 2 iy + ky, 2 ix + kx, co] = act(D[m, n] + bias[co]),  tap = ky * 2 + kx.
// For Cin = 64 (SAM's last upscaling layer, 64 -> 32 channels at 128 x 128 -> 256 x 256 per prompt):
// a CTA keeps its 128 weight columns (16 KB) in shared memory and walks 64-pixel tiles (persistent
// grid), the next tile's pixels loading (cp.async) while the current one is multiplied (m16n8k16
// bf16 mma.sync, fp32 accumulators, 4 warps of 32 x 64) and written out. The tile is staged through
// shared memory on the way out so that every store is 16 contiguous bytes of one output pixel: for
// one ky a tile's output is a contiguous run (the pixels' 2x2 blocks side by side), where the
// per-lane fragment layout would write 4-byte pieces. Replaces a GEMM to a [pixels, 4 Cout]
// intermediate plus a scatter pass (three passes over ~2x the output's bytes, and the bias added
// after the GEMM's bf16 rounding: here the fp32 sum is rounded once). H200, 64 prompts (1M pixels):
// cuBLASLt + scatter 0.50 ms, a first version reloading the weights per tile without overlap 0.40,
// the version with the loads overlapped 0.37 ms (~1.1 TB/s of input + output): the loads were not
// the limit. Its PTX showed the epilogue dominating: erff's ~25 instructions and branches per output
// and ~6 runtime integer divisions per 16-byte store. Both are gone since (fast_erf.h's erf, Cout a
// template argument, tile coordinates once per tile): not yet measured on the GPU.
// Wider inputs (the first layer, 256 -> 64) stay on cuBLASLt + scatter, which measured faster than
// that first version there.
constexpr int kBM = 64, kBN = 128, kK = 64, kThreadsCT = 128, kCtasPerSm = 4;
constexpr int kLd = kK + 8;  // +16 bytes per row: ldmatrix rows hit distinct banks
constexpr int kLdD = kBN + 8;
constexpr int kSmemB = kBN * kLd, kSmemA = kBM * kLd, kSmemD = kBM * kLdD;  // elements
constexpr size_t kSmemBytes = (kSmemB + 2 * kSmemA + kSmemD) * sizeof(__nv_bfloat16);

struct ConvTArgs {
  const bf16* x;   // [M, 64]
  const bf16* wt;  // [N, 64], N = 4 Cout
  const bf16* bias;
  bf16* out;  // [B, 2H, 2W, Cout]; DOT: [B, kDotVecs, 2H, 2W]
  const bf16* vecs;  // DOT: [B, kDotVecs, Cout]
  int M, Cout, H, W, num_tiles;
  bool gelu;
};

// The fused form's vectors per image (SAM's 4 mask tokens' hypernetwork outputs).
constexpr int kDotVecs = 4;

// COUT a template argument: the output addressing divides by it and by the taps per CTA (~6 integer
// divisions per 16-byte chunk when they were runtime values); tiles inside one image row (W a multiple
// of 64, as SAM's 128) take their pixels' coordinates from the tile's first pixel.
// DOT (COUT = 32, row tiles): the epilogue does not write the 32 channels of each output pixel but
// their dot products with the image's kDotVecs vectors (SAM's masks = hyper_in @ upscaled, the
// per-pixel product of the mask tokens with the upscaled embedding): the [B, 2H, 2W, 32]
// intermediate (1 GB for 256 prompts) is never written nor read back, 8x fewer bytes go out.
template <int COUT, bool DOT = false>
__global__ void __launch_bounds__(kThreadsCT, kCtasPerSm) conv_transpose2x2_mma_kernel(ConvTArgs p) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* Bs = reinterpret_cast<bf16*>(smem_raw);
  bf16* As = Bs + kSmemB;  // two buffers of kSmemA
  bf16* Ds = As + 2 * kSmemA;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int wm = warp / 2, wn = warp % 2;  // warp tile: rows wm*32 .. +32, columns wn*64 .. +64
  const int n0 = blockIdx.y * kBN;

  auto load_a = [&](int tile, bf16* dst) {
#pragma unroll
    for (int i = 0; i < kBM * kK / 8 / kThreadsCT; ++i) {
      const int c = tid + i * kThreadsCT, r = c / 8, kc = (c % 8) * 8;
      const int m = tile * kBM + r;
      const bf16* src = p.x + static_cast<int64_t>(m < p.M ? m : 0) * kK + kc;
      ptx::cp_async16(dst + r * kLd + kc, src, m < p.M ? 16 : 0);
    }
  };
  int tile = blockIdx.x;
  if (tile >= p.num_tiles) return;
#pragma unroll
  for (int i = 0; i < kBN * kK / 8 / kThreadsCT; ++i) {
    const int c = tid + i * kThreadsCT, r = c / 8, kc = (c % 8) * 8;
    ptx::cp_async16(Bs + r * kLd + kc, p.wt + static_cast<int64_t>(n0 + r) * kK + kc, 16);
  }
  load_a(tile, As);
  ptx::cp_async_commit();

  constexpr int CC = COUT / 8, TAPS = kBN / COUT, KX = TAPS < 2 ? TAPS : 2;
  const int t0 = n0 / COUT, HW = p.H * p.W;
  const bool row_tiles = p.W % kBM == 0;

  for (int buf = 0; tile < p.num_tiles; tile += gridDim.x, buf ^= 1) {
    const int next = tile + gridDim.x;
    if (next < p.num_tiles) load_a(next, As + (buf ^ 1) * kSmemA);
    ptx::cp_async_commit();  // (an empty group on the last tile keeps the count uniform)
    ptx::cp_async_wait<1>();  // this tile's pixels (and, the first time, the weights) have landed
    __syncthreads();
    const bf16* A = As + buf * kSmemA;

    float acc[2][8][4] = {};
#pragma unroll
    for (int kk = 0; kk < kK; kk += 16) {
      unsigned a[2][4];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        const int r = wm * 32 + mt * 16 + lane % 16, c = kk + (lane / 16) * 8;
        ptx::ldsm_x4(a[mt][0], a[mt][1], a[mt][2], a[mt][3], A + r * kLd + c);
      }
#pragma unroll
      for (int nt = 0; nt < 8; nt += 2) {
        // Matrices: (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15).
        const int mi = lane / 8;
        const int r = wn * 64 + nt * 8 + (mi / 2) * 8 + lane % 8, c = kk + (mi % 2) * 8;
        unsigned b0, b1, b2, b3;
        ptx::ldsm_x4(b0, b1, b2, b3, Bs + r * kLd + c);
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          ptx::mma_bf16(acc[mt][nt], a[mt], b0, b1);
          ptx::mma_bf16(acc[mt][nt + 1], a[mt], b2, b3);
        }
      }
    }

    if constexpr (DOT) {
      static_assert(COUT == 32 && kBN == 4 * COUT, "one CTA column block holds all 4 taps of 32 channels");
      const int m0 = tile * kBM;
      const int b = m0 / HW, iy = (m0 - b * HW) / p.W, ix0 = m0 - b * HW - iy * p.W;  // row tiles
      // This thread's channels of a tap: c = j * 8 + 2 tq + e (j = nt % 4); the vectors and bias there.
      const int tq = lane % 4;
      float vec[kDotVecs][8], bias8[8];
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int c = j * 8 + 2 * tq + e;
          bias8[j * 2 + e] = p.bias ? dev::to_f(p.bias[c]) : 0.f;
#pragma unroll
          for (int m = 0; m < kDotVecs; ++m) vec[m][j * 2 + e] = dev::to_f(p.vecs[(b * kDotVecs + m) * COUT + c]);
        }
      // Per output pixel: GELU'd channels rounded to bf16 as the unfused path stores them, dotted in
      // fp32, the quad's partial sums reduced, rounded once to bf16; staged as [vec][ky][2W run].
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int tl = 0; tl < 2; ++tl) {
            float part[kDotVecs] = {};
#pragma unroll
            for (int j = 0; j < 4; ++j)
#pragma unroll
              for (int e = 0; e < 2; ++e) {
                float v = acc[mt][tl * 4 + j][2 * h + e] + bias8[j * 2 + e];
                if (p.gelu) v = dev::gelu_for<bf16>(v);
                v = __bfloat162float(__float2bfloat16_rn(v));
#pragma unroll
                for (int m = 0; m < kDotVecs; ++m) part[m] = fmaf(v, vec[m][j * 2 + e], part[m]);
              }
#pragma unroll
            for (int m = 0; m < kDotVecs; ++m) {
              part[m] += __shfl_xor_sync(0xffffffffu, part[m], 1);
              part[m] += __shfl_xor_sync(0xffffffffu, part[m], 2);
            }
            if (tq == 0) {
              const int r = wm * 32 + mt * 16 + lane / 4 + h * 8, tap = wn * 2 + tl, ky = tap / 2, kx = tap % 2;
#pragma unroll
              for (int m = 0; m < kDotVecs; ++m)
                Ds[(m * 2 + ky) * (2 * kBM) + 2 * r + kx] = __float2bfloat16_rn(part[m]);
            }
          }
      __syncthreads();
      // kDotVecs x 2 output rows x 2 kBM contiguous values: one 16-byte chunk per thread.
      static_assert(kDotVecs * 2 * 2 * kBM / 8 == kThreadsCT, "one chunk per thread");
      {
        const int chunk = tid % (2 * kBM / 8), ky = (tid / (2 * kBM / 8)) % 2, m = tid / (2 * 2 * kBM / 8);
        const int64_t o =
            ((static_cast<int64_t>(b) * kDotVecs + m) * 2 * p.H + 2 * iy + ky) * (2 * p.W) + 2 * ix0 + chunk * 8;
        *reinterpret_cast<uint4*>(p.out + o) =
            *reinterpret_cast<const uint4*>(Ds + (m * 2 + ky) * (2 * kBM) + chunk * 8);
      }
      __syncthreads();  // Ds and this tile's A buffer are free for the next tiles
      continue;
    }

    if constexpr (!DOT) {  // (the dot form above ends its iteration)
      // Bias, activation, one rounding to bf16, into the staging tile.
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) {
          const int c = wn * 64 + nt * 8 + (lane % 4) * 2;
          const int co = (n0 + c) % COUT;  // the bias from L1 each tile: 16 registers fewer held
          const float bias_lo = p.bias ? dev::to_f(p.bias[co]) : 0.f, bias_hi = p.bias ? dev::to_f(p.bias[co + 1]) : 0.f;
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int r = wm * 32 + mt * 16 + lane / 4 + h * 8;
            float v0 = acc[mt][nt][2 * h] + bias_lo, v1 = acc[mt][nt][2 * h + 1] + bias_hi;
            if (p.gelu) v0 = dev::gelu_for<bf16>(v0), v1 = dev::gelu_for<bf16>(v1);
            *reinterpret_cast<__nv_bfloat162*>(Ds + r * kLdD + c) = __floats2bfloat162_rn(v0, v1);
          }
        }
      __syncthreads();

      // 16-byte chunks in output order: channel chunk fastest, then kx, then the pixel, then ky.
      const int m0 = tile * kBM;
      const int b0 = m0 / HW, rem0 = m0 - b0 * HW, iy0 = rem0 / p.W, ix0 = rem0 - iy0 * p.W;
#pragma unroll 2
      for (int q = tid; q < kBM * kBN / 8; q += kThreadsCT) {
        const int cc = q % CC, q1 = q / CC;
        const int kx_l = q1 % KX, r = (q1 / KX) % kBM, ky_l = q1 / (KX * kBM);
        const int m = m0 + r;
        if (m >= p.M) continue;
        const int tap_l = ky_l * KX + kx_l, tap = t0 + tap_l, ky = tap / 2, kx = tap % 2;
        int b = b0, iy = iy0, ix = ix0 + r;
        if (!row_tiles) {
          b = m / HW;
          const int rem = m - b * HW;
          iy = rem / p.W, ix = rem - iy * p.W;
        }
        const int64_t o = ((static_cast<int64_t>(b) * 2 * p.H + 2 * iy + ky) * (2 * p.W) + 2 * ix + kx) * COUT + cc * 8;
        *reinterpret_cast<uint4*>(p.out + o) = *reinterpret_cast<const uint4*>(Ds + r * kLdD + tap_l * COUT + cc * 8);
      }
      __syncthreads();  // Ds and this tile's A buffer are free for the next tiles
    }
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// The kernels' shared-memory limit, raised once for every instantiation.
void ensure_smem_limit() {
  static const bool ok = [] {
    for (auto k : {conv_transpose2x2_mma_kernel<32>, conv_transpose2x2_mma_kernel<64>, conv_transpose2x2_mma_kernel<128>,
                   conv_transpose2x2_mma_kernel<32, true>})
      check(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kSmemBytes)),
            "cudaFuncSetAttribute(conv_transpose2x2 smem)");
    return true;
  }();
  (void)ok;
}

ConvTArgs make_args(const void* x, const void* wt, const void* bias, void* out, int64_t M, int64_t Cout, int64_t H,
                    int64_t W, bool gelu) {
  ConvTArgs p;
  p.x = static_cast<const bf16*>(x);
  p.wt = static_cast<const bf16*>(wt);
  p.bias = static_cast<const bf16*>(bias);
  p.out = static_cast<bf16*>(out);
  p.vecs = nullptr;
  p.M = static_cast<int>(M), p.Cout = static_cast<int>(Cout);
  p.H = static_cast<int>(H), p.W = static_cast<int>(W);
  p.num_tiles = static_cast<int>((M + kBM - 1) / kBM);
  p.gelu = gelu;
  return p;
}

}  // namespace

bool conv_transpose2x2_mma_supported(int64_t M, int64_t Cin, int64_t Cout, const void* x, const void* wt,
                                     const void* out) {
  return M > 0 && M < (int64_t{1} << 31) - kBM && Cin == kK && (Cout == 32 || Cout == 64 || Cout == 128) &&
         aligned16(x) && aligned16(wt) && aligned16(out);
}

void conv_transpose2x2_mma(const void* x, const void* wt, const void* bias, void* out, int64_t B, int64_t H, int64_t W,
                           int64_t Cin, int64_t Cout, bool gelu) {
  const int64_t M = B * H * W;
  if (M == 0) return;
  VITRT_CHECK(conv_transpose2x2_mma_supported(M, Cin, Cout, x, wt, out), InvalidArgument,
              "cuda conv_transpose2x2_mma: unsupported sizes or alignment (Cin ", Cin, ", Cout ", Cout, ")");
  VITRT_CHECK(H * W < (int64_t{1} << 31) && 2 * W < (int64_t{1} << 31), InvalidArgument,
              "cuda conv_transpose2x2_mma: sizes too large");
  auto kernel = Cout == 32 ? conv_transpose2x2_mma_kernel<32>
                : Cout == 64 ? conv_transpose2x2_mma_kernel<64> : conv_transpose2x2_mma_kernel<128>;
  ensure_smem_limit();
  const ConvTArgs p = make_args(x, wt, bias, out, M, Cout, H, W, gelu);
  const int64_t col_blocks = 4 * Cout / kBN;
  const int64_t ctas = std::max<int64_t>(1, int64_t{kCtasPerSm} * sm_count() / col_blocks);
  const dim3 grid(static_cast<unsigned>(std::min<int64_t>(p.num_tiles, ctas)), static_cast<unsigned>(col_blocks));
  kernel<<<grid, kThreadsCT, kSmemBytes, current_stream()>>>(p);
  check_launch("conv_transpose2x2 mma kernel");
}

bool conv_transpose2x2_dot_supported(int64_t B, int64_t H, int64_t W, int64_t Cin, int64_t Cout, int64_t num_vecs,
                                     const void* x, const void* wt, const void* vecs, const void* out) {
  return B > 0 && Cin == kK && Cout == 32 && num_vecs == kDotVecs && W % kBM == 0 && B * H * W < (int64_t{1} << 31) &&
         2 * W < (int64_t{1} << 31) && aligned16(x) && aligned16(wt) && aligned16(vecs) && aligned16(out);
}

void conv_transpose2x2_gelu_dot(const void* x, const void* wt, const void* bias, const void* vecs, void* out, int64_t B,
                                int64_t H, int64_t W, bool gelu) {
  VITRT_CHECK(conv_transpose2x2_dot_supported(B, H, W, kK, 32, kDotVecs, x, wt, vecs, out), InvalidArgument,
              "cuda conv_transpose2x2_gelu_dot: unsupported sizes or alignment");
  ensure_smem_limit();
  ConvTArgs p = make_args(x, wt, bias, out, B * H * W, 32, H, W, gelu);
  p.vecs = static_cast<const bf16*>(vecs);
  const int64_t ctas = std::max<int64_t>(1, int64_t{kCtasPerSm} * sm_count());
  const dim3 grid(static_cast<unsigned>(std::min<int64_t>(p.num_tiles, ctas)), 1);
  conv_transpose2x2_mma_kernel<32, true><<<grid, kThreadsCT, kSmemBytes, current_stream()>>>(p);
  check_launch("conv_transpose2x2 dot kernel");
}

}  // namespace vitrt::cuda
