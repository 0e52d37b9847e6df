// The device view of an ops::BsrMlpPlan that cuda::bsr_mlp_bf16_fused reads: one place for the op
// (ops_bsr_mlp.cpp), the benchmark and the GPU tests. Include only where the CUDA backend is built.
#pragma once
#include <cstdint>

#include "ops/cuda/bsr_gemm.h"
#include "ops/ops.h"

namespace vitrt::ops {

inline cuda::BsrMlpDeviceSchedule bsr_mlp_device_schedule(const BsrMlpPlan& plan) {
  return {plan.words.data<int32_t>(), plan.group_begin.data<int32_t>(), plan.groups, plan.k_mask, plan.words_count,
          plan.group_begin_host.data()};
}

}  // namespace vitrt::ops
