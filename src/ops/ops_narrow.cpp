// ops::narrow: one strided row copy (outer rows of `length * inner` elements) on either device;
// ops::copy, the whole tensor as one row.
#include "core/device_memory.h"
#include "ops/ops.h"

namespace vitrt::ops {

Tensor narrow(const Tensor& x, int dim, int64_t start, int64_t length) {
  VITRT_CHECK(x.defined(), InvalidArgument, "ops::narrow: undefined tensor");
  const int nd = static_cast<int>(x.dim());
  if (dim < 0) dim += nd;
  VITRT_CHECK(dim >= 0 && dim < nd, InvalidArgument, "ops::narrow: dim out of range for ", shape_str(x.shape()));
  VITRT_CHECK(start >= 0 && length >= 0 && start + length <= x.size(dim), InvalidArgument, "ops::narrow: [", start,
              ", ", start + length, ") is outside dim ", dim, " of ", shape_str(x.shape()));
  Shape out_shape = x.shape();
  out_shape[dim] = length;
  Tensor out = Tensor::empty(out_shape, x.dtype(), x.device());
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < dim; ++d) outer *= x.size(d);
  for (int d = dim + 1; d < nd; ++d) inner *= x.size(d);
  const size_t es = dtype_size(x.dtype());
  const size_t row = static_cast<size_t>(length * inner) * es;
  devmem::copy_rows(out.raw(), row, static_cast<const char*>(x.raw()) + static_cast<size_t>(start * inner) * es,
                    static_cast<size_t>(x.size(dim) * inner) * es, row, static_cast<size_t>(outer), x.device());
  return out;
}

Tensor copy(const Tensor& x) {
  VITRT_CHECK(x.defined(), InvalidArgument, "ops::copy: undefined tensor");
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (x.nbytes()) devmem::copy_rows(out.raw(), x.nbytes(), x.raw(), x.nbytes(), x.nbytes(), 1, x.device());
  return out;
}

}  // namespace vitrt::ops
