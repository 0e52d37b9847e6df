// Image pre-processing on the GPU: Pillow-exact antialiased bilinear resize of 8-bit images
// (a port of ops/cpu/resize_antialias.cpp: the same double-precision coefficients, computed on
// the host by the same code, the same 22-bit fixed-point integer arithmetic and pass order, so
// the output is byte-identical to the CPU path), and SAM's normalise + zero pad. Mask
// post-processing is composed from resize_bilinear (interpolate.h) in ops_cuda.cpp.
#pragma once
#include <cstdint>

#include "vitrt/tensor.h"

namespace vitrt::cuda {

// src [src_h, src_w, channels] -> dst [dst_h, dst_w, channels], both device memory, channels 1..4.
// Allocates a temporary (stream-ordered) and uploads the coefficients synchronously.
void resize_antialias_u8(const uint8_t* src, int src_w, int src_h, int channels, uint8_t* dst, int dst_w, int dst_h);

// img [h, w, channels] uint8 -> out [S, S, channels] of dtype out_dt (F32 or BF16):
// (float(v) - mean[c]) / std[c] inside the h x w corner, 0 elsewhere. channels 1..4.
void normalize_pad(const uint8_t* img, int h, int w, int channels, int S, const float* mean, const float* std,
                   DType out_dt, void* out);

}  // namespace vitrt::cuda
