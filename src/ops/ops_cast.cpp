// ops::cast: to float32 from any floating dtype, or to bfloat16 (round to nearest even), on the
// tensor's device; and ops::relative_error, which compares through it.
#include <cmath>

#include "ops/op_profiler.h"
#include "ops/ops.h"
#include "ops/ops_cuda.h"

namespace vitrt::ops {

Tensor cast(const Tensor& x, DType to) {
  if (x.dtype() == to) return x;
  if (x.is_cuda()) {
    VITRT_PROFILE_OP("cast ", x.numel(), " ", dtype_name(x.dtype()), " -> ", dtype_name(to));
    return cuda_impl::cast(x, to);
  }
  if (to == DType::F32) return x.to_f32();  // any floating dtype on the host
  VITRT_CHECK(to == DType::BF16, InvalidArgument, "ops::cast: ", dtype_name(x.dtype()), " to ", dtype_name(to),
              " is not supported");
  const Tensor f = x.to_f32();
  Tensor out = Tensor::empty(x.shape(), DType::BF16);
  const float* s = f.data<float>();
  uint16_t* o = out.data<uint16_t>();
  for (int64_t i = 0, n = x.numel(); i < n; ++i) o[i] = f32_to_bf16(s[i]);
  return out;
}

double relative_error(const Tensor& got, const Tensor& ref) {
  VITRT_CHECK(got.numel() == ref.numel(), InvalidArgument, "relative_error: shapes ", shape_str(got.shape()), " and ",
              shape_str(ref.shape()), " differ");
  const Tensor a = cast(got, DType::F32).to(Device::CPU), b = cast(ref, DType::F32).to(Device::CPU);
  double num = 0, den = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double d = static_cast<double>(a.data<float>()[i]) - b.data<float>()[i];
    num += d * d;
    den += static_cast<double>(b.data<float>()[i]) * b.data<float>()[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

}  // namespace vitrt::ops
