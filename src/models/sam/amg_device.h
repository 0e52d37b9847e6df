// The GPU path of SamAutomaticMaskGenerator (issue #5): the grid's prompts go through the decoder
// in large batches and the low-res logits stay on the device; the per-pixel work of
// _process_batch -- upscaling, stability score, threshold, box -- runs there (ops/cuda/amg.h),
// and only a few numbers per mask come back for the filters. After the crop's NMS, which runs
// on the host over those numbers, the kept masks are upscaled once more and run-length encoded
// on the device; only their RLE counts come back. Everything later (crop NMS, small regions,
// records) is the CPU code, on the RLE.
//
// Results equal the CPU path's for the same logits, bit for bit (same float operations in the
// upscale, same filters in the same order): tests/gpu/test_cuda_amg.cpp. Internal header.
#pragma once
#include <cstdint>
#include <vector>

#include "models/sam/automatic_mask_generator.h"

namespace vitrt::amg {

// SamPredictor::set_image without the round trip through host memory: the image encoder's
// output [1, out, g, g] in the decoder's dtype on the device; input_h / input_w receive the size
// after ResizeLongestSide.
Tensor encode_image_on_device(const SamModel& model, const Image& rgb, int* input_h, int* input_w);

// decode_points with the results left on the device in the decoder's dtype: all M = 4 outputs,
// masks [n, M, m, m] and iou [n, M] (multimask outputs are 1..3). Every point shares the model's
// no-mask dense embedding (SamModel::no_mask_dense, uploaded with the weights).
void decode_points_on_device(const SamModel& model, const Tensor& features, int input_h, int input_w, int orig_h,
                             int orig_w, const std::vector<GridPoint>& points_px, Tensor& masks, Tensor& iou);

// Waits for the work queued on the device (stage timings); nothing without CUDA.
void sync_device();

// One crop's masks on the device, from decoded batches to RLE.
class DeviceCropMasks {
 public:
  // The upscale geometry of LogitUpscaler(low_res, img_size, input_h, input_w, crop h, crop w)
  // and the crop's place in the orig_h x orig_w image.
  DeviceCropMasks(int low_res, int img_size, int input_h, int input_w, const CropBox& crop, int crop_index,
                  int orig_h, int orig_w, const AmgOptions& options);

  // amg::filter_batch on the device. low_res [n, K, m, m] (CUDA, F32 or BF16) holds the planes,
  // of which planes first .. first + count - 1 of each point are the masks; iou [n, K] float32
  // on the CPU their predicted IoUs. Appends survivors to `out` in the reference's order with
  // box, scores, point and device_plane set and rle empty. Keeps low_res alive for encode_rle.
  void filter_batch(const Tensor& low_res, int first, int count, const Tensor& iou,
                    const std::vector<GridPoint>& points_px, std::vector<CropMask>& out);

  // Fills the rle (column-major runs at the original image size, uncropped) of masks that came
  // from this object's filter_batch, computed on the device.
  void encode_rle(std::vector<CropMask>& masks) const;

 private:
  int low_res_, img_size_, input_h_, input_w_;
  CropBox crop_;
  int crop_index_, orig_h_, orig_w_;
  AmgOptions options_;
  DType dtype_ = DType::F32;
  std::vector<Tensor> batches_;       // the decoded logits that planes_ points into
  std::vector<const void*> planes_;   // device address of each survivor's plane
};

}  // namespace vitrt::amg
