// ops::cast: float32 <-> bfloat16 (round to nearest even), on the tensor's device.
#include "ops/ops.h"
#include "ops/ops_cuda.h"

namespace vitrt::ops {

Tensor cast(const Tensor& x, DType to) {
  if (x.dtype() == to) return x;
  if (x.is_cuda()) return cuda_impl::cast(x, to);
  VITRT_CHECK(x.device() == Device::CPU, InvalidArgument, "ops::cast: no CUDA kernels in this build");
  Tensor out = Tensor::empty(x.shape(), to);
  const int64_t n = x.numel();
  if (x.dtype() == DType::BF16 && to == DType::F32) {
    const uint16_t* s = x.data<uint16_t>();
    float* o = out.data<float>();
    for (int64_t i = 0; i < n; ++i) o[i] = bf16_to_f32(s[i]);
  } else if (x.dtype() == DType::F32 && to == DType::BF16) {
    const float* s = x.data<float>();
    uint16_t* o = out.data<uint16_t>();
    for (int64_t i = 0; i < n; ++i) o[i] = f32_to_bf16(s[i]);
  } else {
    throw InvalidArgument(detail::concat("ops::cast: ", dtype_name(x.dtype()), " to ", dtype_name(to), " is not supported"));
  }
  return out;
}

}  // namespace vitrt::ops
