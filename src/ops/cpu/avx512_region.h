// Brackets a region of a CPU source compiled for AVX-512 (the files keep an AVX2 baseline and pick
// these kernels at run time). GCC takes `#pragma GCC target`; clang ignores that pragma and needs
// its attribute form, which applies the target to every function (lambdas included) in the region.
#pragma once

#if defined(__clang__)
#define VITRT_AVX512_REGION_BEGIN                                                                            \
  _Pragma("clang attribute push(__attribute__((target(\"avx512f,avx512dq,avx512bw,avx512vl,fma,avx2\"))), \
apply_to = function)")
#define VITRT_AVX512_REGION_END _Pragma("clang attribute pop")
#else
#define VITRT_AVX512_REGION_BEGIN \
  _Pragma("GCC push_options") _Pragma("GCC target(\"avx512f,avx512dq,avx512bw,avx512vl,fma,avx2\")")
#define VITRT_AVX512_REGION_END _Pragma("GCC pop_options")
#endif
