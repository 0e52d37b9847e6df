#include "ops/cuda/conv_transpose.h"

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
// CTA tile 64 pixels x 128 columns, K in steps of 64 through shared memory (cp.async), 4 warps of
// 32 x 64 on m16n8k16 bf16 mma.sync with fp32 accumulators. The tile is staged through shared
// memory on the way out so that every store is 16 contiguous bytes of one output pixel: for one ky
// a CTA's output is a contiguous run (the pixels' 2x2 blocks side by side), where the per-lane
// fragment layout would write 4-byte pieces. Replaces a GEMM to a [pixels, 4 Cout] intermediate
// plus a scatter pass (three passes over ~2x the output's bytes, and the bias added after the
// GEMM's bf16 rounding: here the fp32 sum is rounded once).
constexpr int kBM = 64, kBN = 128, kBK = 64, kThreadsCT = 128;
constexpr int kLdA = kBK + 8, kLdB = kBK + 8;  // +16 bytes per row: ldmatrix rows hit distinct banks
constexpr int kLdD = kBN + 8;
constexpr int kSmemA = kBM * kLdA, kSmemB = kBN * kLdB;  // elements
static_assert(kBM * kLdD <= kSmemA + kSmemB, "the output tile reuses the operand tiles' memory");

struct ConvTArgs {
  const bf16* x;   // [M, K]
  const bf16* wt;  // [N, K], N = 4 Cout
  const bf16* bias;
  bf16* out;  // [B, 2H, 2W, Cout]
  int M, K, Cout, H, W;
  bool gelu;
};

__global__ void __launch_bounds__(kThreadsCT) conv_transpose2x2_mma_kernel(ConvTArgs p) {
  __shared__ __align__(16) bf16 smem[kSmemA + kSmemB];
  bf16* As = smem;
  bf16* Bs = smem + kSmemA;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int wm = warp / 2, wn = warp % 2;  // warp tile: rows wm*32 .. +32, columns wn*64 .. +64
  const int m0 = blockIdx.x * kBM, n0 = blockIdx.y * kBN;

  float acc[2][8][4] = {};
  for (int k0 = 0; k0 < p.K; k0 += kBK) {
    // A: 64 rows x 8 chunks of 16 bytes; B: 128 rows x 8 chunks.
#pragma unroll
    for (int i = 0; i < kBM * kBK / 8 / kThreadsCT; ++i) {
      const int c = tid + i * kThreadsCT, r = c / 8, kc = (c % 8) * 8;
      const int m = m0 + r;
      const bf16* src = p.x + static_cast<int64_t>(m < p.M ? m : 0) * p.K + k0 + kc;
      ptx::cp_async16(As + r * kLdA + kc, src, m < p.M ? 16 : 0);
    }
#pragma unroll
    for (int i = 0; i < kBN * kBK / 8 / kThreadsCT; ++i) {
      const int c = tid + i * kThreadsCT, r = c / 8, kc = (c % 8) * 8;
      ptx::cp_async16(Bs + r * kLdB + kc, p.wt + static_cast<int64_t>(n0 + r) * p.K + k0 + kc, 16);
    }
    ptx::cp_async_commit();
    ptx::cp_async_wait<0>();
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kBK; kk += 16) {
      unsigned a[2][4];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        const int r = wm * 32 + mt * 16 + lane % 16, c = kk + (lane / 16) * 8;
        ptx::ldsm_x4(a[mt][0], a[mt][1], a[mt][2], a[mt][3], As + r * kLdA + c);
      }
#pragma unroll
      for (int nt = 0; nt < 8; nt += 2) {
        // Matrices: (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15).
        const int mi = lane / 8;
        const int r = wn * 64 + nt * 8 + (mi / 2) * 8 + lane % 8, c = kk + (mi % 2) * 8;
        unsigned b0, b1, b2, b3;
        ptx::ldsm_x4(b0, b1, b2, b3, Bs + r * kLdB + c);
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          ptx::mma_bf16(acc[mt][nt], a[mt], b0, b1);
          ptx::mma_bf16(acc[mt][nt + 1], a[mt], b2, b3);
        }
      }
    }
    __syncthreads();  // before the next K step (or the output staging) overwrites the tiles
  }

  // Bias, activation, one rounding to bf16, into the staging tile Ds[64][kLdD].
  bf16* Ds = smem;
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      const int c = wn * 64 + nt * 8 + (lane % 4) * 2;
      const int co = (n0 + c) % p.Cout;
      const float b0 = p.bias ? dev::to_f(p.bias[co]) : 0.f, b1 = p.bias ? dev::to_f(p.bias[co + 1]) : 0.f;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = wm * 32 + mt * 16 + lane / 4 + h * 8;
        float v0 = acc[mt][nt][2 * h] + b0, v1 = acc[mt][nt][2 * h + 1] + b1;
        if (p.gelu) v0 = dev::gelu_erf(v0), v1 = dev::gelu_erf(v1);
        *reinterpret_cast<__nv_bfloat162*>(Ds + r * kLdD + c) = __floats2bfloat162_rn(v0, v1);
      }
    }
  __syncthreads();

  // 16-byte chunks in output order: channel chunk fastest, then kx, then the pixel, then ky.
  const int CC = p.Cout / 8, taps = kBN / p.Cout, KX = taps < 2 ? taps : 2, t0 = n0 / p.Cout;
  const int HW = p.H * p.W;
  for (int q = tid; q < kBM * kBN / 8; q += kThreadsCT) {
    const int cc = q % CC, q1 = q / CC;
    const int kx_l = q1 % KX, r = (q1 / KX) % kBM, ky_l = q1 / (KX * kBM);
    const int m = m0 + r;
    if (m >= p.M) continue;
    const int tap_l = ky_l * KX + kx_l, tap = t0 + tap_l, ky = tap / 2, kx = tap % 2;
    const int b = m / HW, rem = m - b * HW, iy = rem / p.W, ix = rem - iy * p.W;
    const int64_t o = ((static_cast<int64_t>(b) * 2 * p.H + 2 * iy + ky) * (2 * p.W) + 2 * ix + kx) * p.Cout + cc * 8;
    *reinterpret_cast<uint4*>(p.out + o) = *reinterpret_cast<const uint4*>(Ds + r * kLdD + tap_l * p.Cout + cc * 8);
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

bool conv_transpose2x2_mma_supported(int64_t M, int64_t Cin, int64_t Cout, const void* x, const void* wt,
                                     const void* out) {
  return M > 0 && M < (int64_t{1} << 31) - kBM && Cin % kBK == 0 && Cout % 8 == 0 && kBN % Cout == 0 &&
         (4 * Cout) % kBN == 0 && aligned16(x) && aligned16(wt) && aligned16(out);
}

void conv_transpose2x2_mma(const void* x, const void* wt, const void* bias, void* out, int64_t B, int64_t H, int64_t W,
                           int64_t Cin, int64_t Cout, bool gelu) {
  const int64_t M = B * H * W;
  if (M == 0) return;
  VITRT_CHECK(conv_transpose2x2_mma_supported(M, Cin, Cout, x, wt, out), InvalidArgument,
              "cuda conv_transpose2x2_mma: unsupported sizes or alignment (Cin ", Cin, ", Cout ", Cout, ")");
  VITRT_CHECK(H * W < (int64_t{1} << 31) && 2 * W < (int64_t{1} << 31) && (M + kBM - 1) / kBM < (int64_t{1} << 31),
              InvalidArgument, "cuda conv_transpose2x2_mma: sizes too large");
  ConvTArgs p;
  p.x = static_cast<const bf16*>(x);
  p.wt = static_cast<const bf16*>(wt);
  p.bias = static_cast<const bf16*>(bias);
  p.out = static_cast<bf16*>(out);
  p.M = static_cast<int>(M), p.K = static_cast<int>(Cin), p.Cout = static_cast<int>(Cout);
  p.H = static_cast<int>(H), p.W = static_cast<int>(W);
  p.gelu = gelu;
  const dim3 grid(static_cast<unsigned>((M + kBM - 1) / kBM), static_cast<unsigned>(4 * Cout / kBN));
  conv_transpose2x2_mma_kernel<<<grid, kThreadsCT, 0, current_stream()>>>(p);
  check_launch("conv_transpose2x2 mma kernel");
}

}  // namespace vitrt::cuda
