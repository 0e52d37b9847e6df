#include "models/sam/amg_device.h"

#include <algorithm>
#include <cstring>

#include "core/device_memory.h"
#include "ops/op_profiler.h"
#include "ops/ops.h"
#include "vitrt/error.h"

#ifdef VITRT_HAVE_CUDA
#include "ops/cuda/amg.h"
#include "ops/cuda/runtime.h"
#endif

namespace vitrt::amg {

Tensor encode_image_on_device(const SamModel& model, const Image& rgb, int* input_h, int* input_w) {
  VITRT_CHECK(model.device == Device::CUDA, InvalidArgument, "encode_image_on_device: the model is not on CUDA");
  sam::EncoderInput in = sam::prepare_encoder_input(rgb, model);
  if (input_h) *input_h = in.input_height;
  if (input_w) *input_w = in.input_width;
  return ops::cast(model.image_encoder.forward(in.pixels), model.decoder_dtype);  // what the decoder reads
}

void decode_points_on_device(const SamModel& model, const Tensor& features, int input_h, int input_w, int orig_h,
                             int orig_w, const std::vector<GridPoint>& points_px, Tensor& masks, Tensor& iou) {
  const Tensor sparse = point_sparse_tokens(model, input_h, input_w, orig_h, orig_w, points_px);
  model.mask_decoder.forward_shared_dense(features, model.image_pe, sparse, model.no_mask_dense, masks, iou);
}

void sync_device() {
#ifdef VITRT_HAVE_CUDA
  if (devmem::cuda_available()) cuda::synchronize();
#endif
}

DeviceCropMasks::DeviceCropMasks(int low_res, int img_size, int input_h, int input_w, const CropBox& crop,
                                 int crop_index, int orig_h, int orig_w, const AmgOptions& options)
    : low_res_(low_res),
      img_size_(img_size),
      input_h_(input_h),
      input_w_(input_w),
      crop_(crop),
      crop_index_(crop_index),
      orig_h_(orig_h),
      orig_w_(orig_w),
      options_(options) {}

#ifndef VITRT_HAVE_CUDA

void DeviceCropMasks::filter_batch(const Tensor&, int, int, const Tensor&, const std::vector<GridPoint>&,
                                   std::vector<CropMask>&) {
  throw Error("the automatic mask generator's CUDA path is not available: this vitrt build has no CUDA backend");
}
void DeviceCropMasks::encode_rle(std::vector<CropMask>&) const {
  throw Error("the automatic mask generator's CUDA path is not available: this vitrt build has no CUDA backend");
}

#else

namespace {

// Host array -> device tensor of raw bytes (pointer lists and the like).
template <class T>
Tensor upload(const std::vector<T>& v) {
  Tensor host = Tensor::empty({static_cast<int64_t>(v.size() * sizeof(T))}, DType::U8);
  if (!v.empty()) std::memcpy(host.raw(), v.data(), v.size() * sizeof(T));
  return host.to(Device::CUDA);
}

// A device buffer of n elements of T (as bytes; at least one byte so that it has an address).
template <class T>
Tensor device_buffer(int64_t n) {
  return Tensor::empty({std::max<int64_t>(1, n * static_cast<int64_t>(sizeof(T)))}, DType::U8, Device::CUDA);
}

template <class T>
std::vector<T> download(const Tensor& dev, int64_t n) {
  std::vector<T> v(static_cast<size_t>(n));
  if (n > 0) {
    const Tensor host = dev.slice0(0, n * static_cast<int64_t>(sizeof(T))).to(Device::CPU);
    std::memcpy(v.data(), host.raw(), v.size() * sizeof(T));
  }
  return v;
}

// LogitUpscaler's geometry for the kernels: low-res square -> img_size, keep input_h x input_w, -> the crop.
cuda::MaskUpscale upscale_geometry(int low_res, int img_size, int input_h, int input_w, const CropBox& crop) {
  cuda::MaskUpscale g;
  g.low_h = g.low_w = low_res;
  g.img_size = img_size;
  g.input_h = input_h;
  g.input_w = input_w;
  g.out_h = crop.height();
  g.out_w = crop.width();
  return g;
}

// Planes per device call of encode_rle: bounds the bit-packed masks' memory (a 4K image's mask is
// ~1 MiB packed) while keeping every launch large.
constexpr size_t kRleChunk = 512;

}  // namespace

void DeviceCropMasks::filter_batch(const Tensor& low_res, int first, int count, const Tensor& iou,
                                   const std::vector<GridPoint>& pts, std::vector<CropMask>& out) {
  VITRT_CHECK(low_res.is_cuda() && low_res.dim() == 4 && low_res.size(2) == low_res_ && low_res.size(3) == low_res_,
              InvalidArgument, "DeviceCropMasks: low-res logits must be CUDA [n, K, ", low_res_, ", ", low_res_,
              "], got ", shape_str(low_res.shape()), low_res.is_cuda() ? "" : " on the CPU");
  const int64_t n = low_res.size(0), K = low_res.size(1), plane = static_cast<int64_t>(low_res_) * low_res_;
  VITRT_CHECK(first >= 0 && count >= 1 && first + count <= K, InvalidArgument, "DeviceCropMasks: planes ", first,
              "..", first + count - 1, " of ", K);
  VITRT_CHECK(!iou.is_cuda() && iou.dtype() == DType::F32 && iou.shape() == (Shape{n, K}), InvalidArgument,
              "DeviceCropMasks: iou must be float32 [", n, ", ", K, "] on the CPU, got ", shape_str(iou.shape()));
  VITRT_CHECK(static_cast<int64_t>(pts.size()) == n, InvalidArgument, "DeviceCropMasks: ", pts.size(),
              " points for ", n, " decoded prompts");
  VITRT_CHECK(batches_.empty() || low_res.dtype() == dtype_, InvalidArgument,
              "DeviceCropMasks: batches of one crop must have one dtype");
  dtype_ = low_res.dtype();
  const AmgOptions& o = options_;
  const FilterThresholds t(o);  // the CPU filter's float32 thresholds

  // The IoU filter on the host: it needs no pixels, and the scores are here anyway.
  const float* scores = iou.data<float>();
  const char* base = static_cast<const char*>(low_res.raw());
  const size_t plane_bytes = static_cast<size_t>(plane) * dtype_size(dtype_);
  std::vector<int64_t> cand;  // i * K + plane index
  std::vector<const void*> cand_ptr;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = first; k < first + count; ++k) {
      const int64_t idx = i * K + k;
      if (o.pred_iou_thresh > 0.0 && !(scores[idx] > t.iou)) continue;
      cand.push_back(idx);
      cand_ptr.push_back(base + static_cast<size_t>(idx) * plane_bytes);
    }
  if (cand.empty()) return;

  const int64_t nc = static_cast<int64_t>(cand.size());
  const Tensor ptrs = upload(cand_ptr);
  Tensor stats_dev = device_buffer<cuda::MaskPlaneStats>(nc);
  const cuda::MaskUpscale g = upscale_geometry(low_res_, img_size_, input_h_, input_w_, crop_);
  VITRT_PROFILE_OP("amg upscaled_mask_stats ", nc, " masks");
  cuda::upscaled_mask_stats(dtype_, static_cast<const void* const*>(ptrs.raw()), nc, g, t.mask, t.above_hi, t.above_lo,
                            static_cast<cuda::MaskPlaneStats*>(stats_dev.raw()));
  const std::vector<cuda::MaskPlaneStats> stats = download<cuda::MaskPlaneStats>(stats_dev, nc);

  bool kept_any = false;
  for (int64_t c = 0; c < nc; ++c) {
    const cuda::MaskPlaneStats& s = stats[c];
    const float stab = stability_score(s.above_hi, s.above_lo);
    if (o.stability_score_thresh > 0.0 && !(stab >= t.stability)) continue;
    // batched_mask_to_box: [0, 0, 0, 0] for an empty mask.
    const std::array<int64_t, 4> box =
        s.empty() ? std::array<int64_t, 4>{0, 0, 0, 0} : std::array<int64_t, 4>{s.x0, s.y0, s.x1, s.y1};
    if (is_box_near_crop_edge(box, crop_, orig_w_, orig_h_)) continue;
    const int64_t idx = cand[c];
    CropMask cm;
    cm.box = box;
    cm.iou = scores[idx];
    cm.stability = stab;
    cm.point = pts[idx / K];
    cm.crop = crop_index_;
    cm.device_plane = static_cast<int64_t>(planes_.size());
    planes_.push_back(cand_ptr[c]);
    out.push_back(std::move(cm));
    kept_any = true;
  }
  if (kept_any) batches_.push_back(low_res);
}

void DeviceCropMasks::encode_rle(std::vector<CropMask>& masks) const {
  const cuda::MaskUpscale g = upscale_geometry(low_res_, img_size_, input_h_, input_w_, crop_);
  cuda::MaskPlacement p;
  p.h = crop_.height();
  p.w = crop_.width();
  p.x0 = crop_.x0;
  p.y0 = crop_.y0;
  p.H = orig_h_;
  p.W = orig_w_;
  const int64_t wpp = cuda::mask_words_per_plane(p.h, p.w);
  for (size_t m0 = 0; m0 < masks.size(); m0 += kRleChunk) {
    const size_t m1 = std::min(masks.size(), m0 + kRleChunk);
    const int64_t n = static_cast<int64_t>(m1 - m0);
    std::vector<const void*> ptr(n);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t dp = masks[m0 + i].device_plane;
      VITRT_CHECK(dp >= 0 && dp < static_cast<int64_t>(planes_.size()), InvalidArgument,
                  "DeviceCropMasks::encode_rle: mask ", m0 + i, " did not come from this crop's device filter");
      ptr[i] = planes_[dp];
    }
    const Tensor ptrs = upload(ptr);
    Tensor words = device_buffer<uint32_t>(n * wpp);
    VITRT_PROFILE_OP("amg mask bits + rle ", n, " masks");
    cuda::upscaled_mask_bits(dtype_, static_cast<const void* const*>(ptrs.raw()), n, g, 0.0f,
                             static_cast<uint32_t*>(words.raw()));
    Tensor col_offsets = device_buffer<int64_t>(cuda::rle_col_offsets_size(n, p));
    Tensor starts_dev = device_buffer<int64_t>(n + 1);
    cuda::rle_plan(static_cast<const uint32_t*>(words.raw()), n, p, static_cast<int64_t*>(col_offsets.raw()),
                   static_cast<int64_t*>(starts_dev.raw()));
    const std::vector<int64_t> starts = download<int64_t>(starts_dev, n + 1);
    const int64_t total = starts[n];
    Tensor counts_dev = device_buffer<uint32_t>(total);
    cuda::rle_write(static_cast<const uint32_t*>(words.raw()), n, p, static_cast<const int64_t*>(col_offsets.raw()),
                    static_cast<const int64_t*>(starts_dev.raw()), total, static_cast<uint32_t*>(counts_dev.raw()));
    const std::vector<uint32_t> counts = download<uint32_t>(counts_dev, total);
    for (int64_t i = 0; i < n; ++i)
      masks[m0 + i].rle.assign(counts.begin() + starts[i], counts.begin() + starts[i + 1]);
  }
}

#endif  // VITRT_HAVE_CUDA

}  // namespace vitrt::amg
