// SamPredictor (segment_anything/predictor.py): ResizeLongestSide + normalise + pad, the image
// encoder once per image, then prompt encoding, mask decoding and mask post-processing per query.
#include <cmath>
#include <cstring>
#include <map>

#include "core/device_memory.h"
#include "models/sam/sam_model.h"
#include "ops/cpu/interpolate.h"
#include "ops/cpu/resize_antialias.h"
#include "ops/op_profiler.h"
#include "ops/ops.h"
#include "ops/ops_cuda.h"

namespace vitrt {

namespace {

// ResizeLongestSide.get_preprocess_shape, in double precision like Python.
std::pair<int, int> preprocess_shape(int h, int w, int target) {
  const double scale = target * 1.0 / std::max(h, w);
  return {static_cast<int>(h * scale + 0.5), static_cast<int>(w * scale + 0.5)};
}

// Normalise (x - mean) / std in float32 and zero-pad bottom/right to S x S. NHWC [1, S, S, 3].
Tensor normalise_and_pad(const Image& resized, const SamConfig& c) {
  const int S = c.img_size;
  Tensor x = Tensor::zeros({1, S, S, 3});
  float* out = x.data<float>();
  for (int y = 0; y < resized.height; ++y) {
    const uint8_t* row = resized.row(y);
    float* o = out + static_cast<int64_t>(y) * S * 3;
    for (int i = 0; i < resized.width; ++i)
      for (int ch = 0; ch < 3; ++ch)
        o[i * 3 + ch] = (static_cast<float>(row[i * 3 + ch]) - c.pixel_mean[ch]) / c.pixel_std[ch];
  }
  return x;
}

bool finite(float v) { return std::isfinite(v); }

// An embedding's features where and how the decoder reads them (for a CPU model the host tensor
// itself: no copy).
Tensor upload_for_decoder(const SamModel& model, const Tensor& features) {
  return ops::cast(features.to(model.device), model.decoder_dtype);
}

}  // namespace

SamPredictor::SamPredictor(std::shared_ptr<const SamModel> model) : model_(std::move(model)) {
  VITRT_CHECK(model_ != nullptr, InvalidArgument, "SamPredictor needs a model");
}

namespace sam {

EncoderInput prepare_encoder_input(const Image& rgb, const SamModel& model) {
  VITRT_CHECK(!rgb.empty(), ImageError, "cannot segment an empty image (", rgb.width, "x", rgb.height, ")");
  VITRT_CHECK(rgb.channels == 3 && rgb.pixels.size() == static_cast<size_t>(rgb.width) * rgb.height * 3,
              ImageError, "expected an RGB image with ", rgb.width, "x", rgb.height, "x3 bytes");
  const SamConfig& c = model.config;
  EncoderInput in;
  in.original_height = rgb.height;
  in.original_width = rgb.width;
  if (model.device == Device::CUDA) {  // upload the uint8 image; resize/normalise/pad on the GPU
    in.pixels = ops::cuda_impl::preprocess_image(rgb, c.img_size, c.pixel_mean, c.pixel_std, model.dtype,
                                                 &in.input_height, &in.input_width);
  } else {
    Image resized = resize_longest_side(rgb, c.img_size);
    in.input_height = resized.height;
    in.input_width = resized.width;
    in.pixels = normalise_and_pad(resized, c);
  }
  return in;
}

}  // namespace sam

namespace sam {

std::vector<ImageEmbedding> encode_inputs(const SamModel& model, const std::vector<const EncoderInput*>& inputs) {
  if (inputs.empty()) return {};
  const int64_t S = model.config.img_size;
  std::vector<Tensor> pixels;
  for (const EncoderInput* in : inputs) {
    VITRT_CHECK(in->pixels.dim() == 4 && in->pixels.size(0) == 1 && in->pixels.size(1) == S, InvalidArgument,
                "encoder input has shape ", shape_str(in->pixels.shape()), ", expected [1, ", S, ", ", S, ", 3]");
    pixels.push_back(in->pixels);
  }
  const Tensor batch = pixels.size() == 1 ? pixels[0] : ops::cat(pixels, 0);
  // Embeddings are kept as float32 on the host (what save_embedding writes and the server caches).
  const Tensor features = ops::cast(model.image_encoder.forward(batch), DType::F32).to(Device::CPU);
  std::vector<ImageEmbedding> out(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    ImageEmbedding& e = out[i];
    const int64_t b = static_cast<int64_t>(i);
    // clone(): each embedding owns its memory rather than pinning the whole batch.
    e.features = inputs.size() == 1 ? features : features.slice0(b, b + 1).clone();
    e.original_height = inputs[i]->original_height;
    e.original_width = inputs[i]->original_width;
    e.input_height = inputs[i]->input_height;
    e.input_width = inputs[i]->input_width;
    e.model_fingerprint = model.fingerprint;
  }
  return out;
}

}  // namespace sam

std::vector<ImageEmbedding> embed_images(const SamModel& model, std::span<const Image> images) {
  // Each image resized (longest side) and padded to the model's square input on its own, then all
  // of them through the image encoder in one batch.
  std::vector<sam::EncoderInput> inputs;
  for (const Image& im : images) inputs.push_back(sam::prepare_encoder_input(im, model));
  std::vector<const sam::EncoderInput*> ptrs;
  for (const sam::EncoderInput& in : inputs) ptrs.push_back(&in);
  return sam::encode_inputs(model, ptrs);
}

void SamPredictor::set_image(const Image& rgb) {
  has_embedding_ = false;
  embedding_ = embed_images(*model_, std::span<const Image>(&rgb, 1)).front();
  features_in_model_ = upload_for_decoder(*model_, embedding_.features);
  has_embedding_ = true;
}

void SamPredictor::set_embedding(ImageEmbedding e) {
  const SamConfig& c = model_->config;
  VITRT_CHECK(e.model_fingerprint == model_->fingerprint, InvalidArgument, "the embedding was computed by model '",
              e.model_fingerprint, "', not by the loaded model '", model_->fingerprint, "'");
  const Shape want{1, c.out_chans, c.grid_size(), c.grid_size()};
  e.features.expect_shape(want, "image embedding");
  auto [ih, iw] = preprocess_shape(e.original_height, e.original_width, c.img_size);
  VITRT_CHECK(e.original_height > 0 && e.original_width > 0 && e.input_height == ih && e.input_width == iw,
              InvalidArgument, "embedding sizes are inconsistent: original ", e.original_height, "x",
              e.original_width, " should resize to ", ih, "x", iw, ", the file says ", e.input_height, "x",
              e.input_width);
  embedding_ = std::move(e);
  features_in_model_ = upload_for_decoder(*model_, embedding_.features);
  has_embedding_ = true;
}

const ImageEmbedding& SamPredictor::embedding() const {
  VITRT_CHECK(has_embedding_, InvalidArgument, "no image set: call set_image() or set_embedding() first");
  return embedding_;
}

namespace {

// Validates a prompt against the image and maps it into the model's input frame
// (ResizeLongestSide.apply_coords: coords * (new / old) in double, then float32).
sam::ModelPrompt to_model_prompt(const Prompt& p, const ImageEmbedding& e, const SamConfig& c) {
  const int H = e.original_height, W = e.original_width;
  const double sx = static_cast<double>(e.input_width) / W, sy = static_cast<double>(e.input_height) / H;
  sam::ModelPrompt m;
  for (size_t i = 0; i < p.points.size(); ++i) {
    const Point& pt = p.points[i];
    VITRT_CHECK(finite(pt.x) && finite(pt.y), InvalidArgument, "point ", i, " has a non-finite coordinate");
    VITRT_CHECK(pt.x >= 0 && pt.y >= 0 && pt.x <= W && pt.y <= H, InvalidArgument, "point ", i, " (", pt.x, ", ",
                pt.y, ") lies outside the ", W, "x", H, " image");
    VITRT_CHECK(pt.label == 1 || pt.label == 0 || pt.label == -1, InvalidArgument, "point ", i, " has label ",
                pt.label, "; labels are 1 (foreground), 0 (background) or -1 (ignore)");
    m.coords.push_back(static_cast<float>(pt.x * sx));
    m.coords.push_back(static_cast<float>(pt.y * sy));
    m.labels.push_back(pt.label);
  }
  if (p.box) {
    const Box& b = *p.box;
    VITRT_CHECK(finite(b.x0) && finite(b.y0) && finite(b.x1) && finite(b.y1), InvalidArgument,
                "box has a non-finite coordinate");
    VITRT_CHECK(b.x1 >= b.x0 && b.y1 >= b.y0, InvalidArgument, "box (", b.x0, ", ", b.y0, ", ", b.x1, ", ", b.y1,
                ") has a negative size: expected x0 <= x1 and y0 <= y1");
    VITRT_CHECK(b.x0 >= 0 && b.y0 >= 0 && b.x1 <= W && b.y1 <= H, InvalidArgument, "box (", b.x0, ", ", b.y0, ", ",
                b.x1, ", ", b.y1, ") lies outside the ", W, "x", H, " image");
    m.box = std::array<float, 4>{static_cast<float>(b.x0 * sx), static_cast<float>(b.y0 * sy),
                                 static_cast<float>(b.x1 * sx), static_cast<float>(b.y1 * sy)};
  }
  if (p.mask_input.defined()) {
    const int64_t m4 = c.low_res_size();
    VITRT_CHECK(p.mask_input.dtype() == DType::F32 && p.mask_input.numel() == m4 * m4 &&
                    (p.mask_input.shape() == Shape{1, m4, m4} || p.mask_input.shape() == Shape{m4, m4}),
                InvalidArgument, "mask input must be float32 low-res logits of shape [1, ", m4, ", ", m4, "], got ",
                dtype_name(p.mask_input.dtype()), " ", shape_str(p.mask_input.shape()));
    const float* v = p.mask_input.data<float>();
    for (int64_t i = 0; i < m4 * m4; ++i)
      VITRT_CHECK(finite(v[i]), InvalidArgument, "mask input holds a non-finite value at index ", i);
    m.mask_input = p.mask_input;
  }
  return m;
}

// Sam.postprocess_masks on the CPU: bilinear to S x S, crop the un-padded input region, bilinear
// to the original size. Then threshold at 0 unless logits are asked for. (The GPU runs the same
// arithmetic for a whole batch of prompts: ops::cuda_impl::postprocess_masks, see predict_batch.)
void postprocess(const Tensor& low_res, const ImageEmbedding& e, const SamConfig& c, bool return_logits,
                 Prediction& out) {
  const int64_t K = low_res.size(0), S = c.img_size, ih = e.input_height, iw = e.input_width;
  // Upsample to S x S but compute only the region the crop keeps (identical values).
  Tensor crop = Tensor::empty({K, ih, iw});
  cpu::resize_bilinear_cropped(low_res.data<float>(), crop.data<float>(), K, low_res.size(1), low_res.size(2), S, S,
                               ih, iw);
  Tensor logits = ops::resize_bilinear(crop, e.original_height, e.original_width);
  out.masks = Tensor::empty(logits.shape(), DType::U8);
  const float* l = logits.data<float>();
  uint8_t* m = out.masks.data<uint8_t>();
  const int64_t n = logits.numel();
  for (int64_t i = 0; i < n; ++i) m[i] = l[i] > 0.0f;  // mask_threshold = 0.0
  if (return_logits) out.logits = logits;
}

}  // namespace

Prediction SamPredictor::predict(const Prompt& prompt, bool multimask_output, bool return_logits) const {
  return predict_batch({prompt}, multimask_output, return_logits).front();
}

namespace {

// One decoder batch: the prompt sets with the same number of sparse tokens, across all images,
// grouped by image (the ragged batch segment-anything-fast builds with NestedTensor).
struct DecoderGroup {
  std::vector<std::pair<int64_t, size_t>> members;  // (image, prompt) per batch row, in image order
  std::vector<int64_t> images, counts;              // the images the group touches, its prompts on each
  Tensor low_res;  // [B, K, m4, m4] the returned masks' low-res logits (model device and dtype)
  Tensor iou;      // [B, M] predicted IoU of all M mask tokens (model device and dtype)
  // GPU only, one per entry of `images`: its masks post-processed on the device in one launch,
  // [n * K, H, W] uint8, and the float32 logits when asked for.
  std::vector<Tensor> masks, logits;
};

// Prompt encoding and the mask decoder for prompts on one or several images; on the GPU the mask
// post-processing too. Prompts without a mask input share one dense embedding, so neither the
// per-prompt [g*g, D] dense tensor nor the [B, g*g, D] dense batch is ever built for them.
// `first_in_model`: embeddings[0]'s features already uploaded (SamPredictor keeps them), or null.
std::vector<DecoderGroup> run_decoder(const SamModel& model, const std::vector<const ImageEmbedding*>& embeddings,
                                      const std::vector<std::vector<Prompt>>& prompts, bool multimask_output,
                                      bool return_logits, const Tensor* first_in_model = nullptr) {
  const SamConfig& c = model.config;
  const sam::PromptEncoder& pe = model.prompt_encoder;
  const int64_t D = c.out_chans, HW = c.grid_size() * c.grid_size(), m4 = c.low_res_size();
  const int64_t I = static_cast<int64_t>(embeddings.size());

  // Per (image, prompt): the sparse tokens (and the dense embedding only for a mask input); groups
  // by sparse token count.
  std::map<int64_t, std::vector<std::pair<int64_t, size_t>>> by_tokens;
  std::vector<std::vector<Tensor>> sparse(I), dense(I);
  for (int64_t i = 0; i < I; ++i) {
    const size_t n = prompts[i].size();
    sparse[i].resize(n);
    dense[i].resize(n);
    for (size_t j = 0; j < n; ++j) {
      sam::ModelPrompt mp = to_model_prompt(prompts[i][j], *embeddings[i], c);
      sparse[i][j] = pe.sparse_embeddings(mp);
      if (mp.mask_input.defined()) dense[i][j] = pe.dense_embeddings(mp);
      by_tokens[sparse[i][j].size(0)].push_back({i, j});
    }
  }

  const int64_t first = multimask_output ? 1 : 0;
  const int64_t K = multimask_output ? c.num_multimask_outputs : 1;
  const bool on_gpu = model.device == Device::CUDA;
  Tensor no_mask_host;  // [g*g, D] float32, built only when a group mixes mask inputs with prompts without
  // The embeddings are kept as float32 on the host; the decoder gets each in its own device/dtype,
  // converted once however many token-count groups use it.
  std::vector<Tensor> in_model(static_cast<size_t>(I));
  if (I > 0 && first_in_model && first_in_model->defined()) in_model[0] = *first_in_model;
  auto image_in_model = [&](int64_t i) -> const Tensor& {
    Tensor& t = in_model[static_cast<size_t>(i)];
    if (!t.defined()) t = upload_for_decoder(model, embeddings[i]->features);
    return t;
  };
  std::vector<DecoderGroup> groups;
  for (auto& [n_tokens, members] : by_tokens) {
    DecoderGroup& g = groups.emplace_back();
    g.members = std::move(members);
    const int64_t B = static_cast<int64_t>(g.members.size());
    for (const auto& [i, j] : g.members) {
      if (g.images.empty() || g.images.back() != i) {
        g.images.push_back(i);
        g.counts.push_back(0);
      }
      ++g.counts.back();
    }
    std::vector<Tensor> feats;
    for (int64_t i : g.images) feats.push_back(image_in_model(i));
    const Tensor image = feats.size() == 1 ? feats[0] : ops::cat(feats, 0);

    Tensor sp = Tensor::empty({B, n_tokens, D});
    bool any_mask_input = false;
    for (int64_t b = 0; b < B; ++b) {
      const auto [i, j] = g.members[b];
      std::memcpy(sp.data<float>() + b * n_tokens * D, sparse[i][j].raw(), sizeof(float) * n_tokens * D);
      any_mask_input |= dense[i][j].defined();
    }
    if (!any_mask_input) {
      // The K returned masks of every prompt, [B, K, m4, m4], left on the model's device (on the
      // GPU a replayed CUDA graph when the shape was seen before: decoder_graph.h).
      model.mask_decoder.forward_shared_dense(image, model.image_pe, sp, model.no_mask_dense, g.low_res, g.iou,
                                              &g.counts, first, K);
    } else {
      Tensor masks;
      Tensor de = Tensor::empty({B, HW, D});
      for (int64_t b = 0; b < B; ++b) {
        const auto [i, j] = g.members[b];
        if (!dense[i][j].defined() && !no_mask_host.defined()) no_mask_host = pe.dense_embeddings(sam::ModelPrompt{});
        const Tensor& d = dense[i][j].defined() ? dense[i][j] : no_mask_host;
        std::memcpy(de.data<float>() + b * HW * D, d.raw(), sizeof(float) * HW * D);
      }
      model.mask_decoder.forward(image, model.image_pe, sp, de, masks, g.iou, &g.counts);
      // forward(), the mask-input path, returns all masks on the host: the K returned ones are
      // moved back for the GPU's post-processing.
      g.low_res = (K == masks.size(1) ? masks : ops::narrow(masks, 1, first, K)).to(model.device);
      g.iou = g.iou.to(model.device);
    }
    if (!on_gpu) continue;
    for (size_t gi = 0, b0 = 0; gi < g.images.size(); b0 += g.counts[gi], ++gi) {
      const ImageEmbedding& e = *embeddings[g.images[gi]];
      const int64_t n = g.counts[gi];
      VITRT_PROFILE_OP("postprocess_masks ", n * K, " x ", e.original_height, "x", e.original_width);
      Tensor logits_dev;
      const Tensor mine = g.low_res.slice0(b0, b0 + n).reshape({n * K, m4, m4});
      g.masks.push_back(ops::cuda_impl::postprocess_masks(mine, c.img_size, e.input_height, e.input_width,
                                                          e.original_height, e.original_width,
                                                          return_logits ? &logits_dev : nullptr));
      g.logits.push_back(logits_dev);
    }
  }
  return groups;
}

// run_decoder with every result brought to the host. A prediction's masks (and logits) are views
// of its image's block for the group (one download each); the low-res logits are copied out, as
// callers keep those alone (the server caches them for the next click).
std::vector<std::vector<Prediction>> decode_prompts(const SamModel& model,
                                                    const std::vector<const ImageEmbedding*>& embeddings,
                                                    const std::vector<std::vector<Prompt>>& prompts,
                                                    bool multimask_output, bool return_logits,
                                                    const Tensor* first_in_model = nullptr) {
  const SamConfig& c = model.config;
  const int64_t m4 = c.low_res_size();
  const int64_t first = multimask_output ? 1 : 0;
  const int64_t K = multimask_output ? c.num_multimask_outputs : 1;
  std::vector<std::vector<Prediction>> results(embeddings.size());
  for (size_t i = 0; i < embeddings.size(); ++i) results[i].resize(prompts[i].size());
  for (const DecoderGroup& g :
       run_decoder(model, embeddings, prompts, multimask_output, return_logits, first_in_model)) {
    const int64_t M = g.iou.size(1);
    const Tensor low_host = ops::cast(g.low_res, DType::F32).to(Device::CPU);
    const Tensor iou_host = ops::cast(g.iou, DType::F32).to(Device::CPU);
    for (size_t gi = 0, b0 = 0; gi < g.images.size(); b0 += g.counts[gi], ++gi) {
      const ImageEmbedding& e = *embeddings[g.images[gi]];
      const bool on_gpu = !g.masks.empty();
      const Tensor up_masks = on_gpu ? g.masks[gi].to(Device::CPU) : Tensor();
      const Tensor up_logits = on_gpu && return_logits ? g.logits[gi].to(Device::CPU) : Tensor();
      const Shape plane{K, static_cast<int64_t>(e.original_height), static_cast<int64_t>(e.original_width)};
      for (int64_t k0 = 0; k0 < g.counts[gi]; ++k0) {
        const int64_t b = static_cast<int64_t>(b0) + k0;
        Prediction& out = results[g.members[b].first][g.members[b].second];
        out.low_res_logits = low_host.slice0(b, b + 1).reshape({K, m4, m4}).clone();
        for (int64_t k = 0; k < K; ++k) out.scores.push_back(iou_host.data<float>()[b * M + first + k]);
        if (on_gpu) {
          out.masks = up_masks.slice0(k0 * K, (k0 + 1) * K).reshape(plane);
          if (return_logits) out.logits = up_logits.slice0(k0 * K, (k0 + 1) * K).reshape(plane);
        } else {
          postprocess(out.low_res_logits, e, c, return_logits, out);
        }
      }
    }
  }
  return results;
}

}  // namespace

std::vector<Prediction> SamPredictor::predict_batch(const std::vector<Prompt>& prompts, bool multimask_output,
                                                    bool return_logits) const {
  return decode_prompts(*model_, {&embedding()}, {prompts}, multimask_output, return_logits, &features_in_model_)
      .front();
}

BatchPrediction SamPredictor::predict_batch_on_device(const std::vector<Prompt>& prompts, bool multimask_output,
                                                      bool return_logits) const {
  const SamModel& model = *model_;
  const ImageEmbedding& e = embedding();
  const SamConfig& c = model.config;
  const int64_t B = static_cast<int64_t>(prompts.size()), m4 = c.low_res_size();
  const int64_t K = multimask_output ? c.num_multimask_outputs : 1, first = multimask_output ? 1 : 0;
  const int64_t H = e.original_height, W = e.original_width;
  BatchPrediction out;
  if (model.device == Device::CPU) {  // the host is the model's device: stack predict_batch's answers
    const std::vector<Prediction> preds = predict_batch(prompts, multimask_output, return_logits);
    out.masks = Tensor::empty({B, K, H, W}, DType::U8);
    out.scores = Tensor::empty({B, K});
    out.low_res_logits = Tensor::empty({B, K, m4, m4});
    if (return_logits) out.logits = Tensor::empty({B, K, H, W});
    for (int64_t b = 0; b < B; ++b) {
      const Prediction& p = preds[b];
      std::memcpy(out.masks.data<uint8_t>() + b * K * H * W, p.masks.raw(), p.masks.nbytes());
      std::memcpy(out.scores.data<float>() + b * K, p.scores.data(), sizeof(float) * K);
      std::memcpy(out.low_res_logits.data<float>() + b * K * m4 * m4, p.low_res_logits.raw(), p.low_res_logits.nbytes());
      if (return_logits) std::memcpy(out.logits.data<float>() + b * K * H * W, p.logits.raw(), p.logits.nbytes());
    }
    return out;
  }
  std::vector<DecoderGroup> groups =
      run_decoder(model, {&e}, {prompts}, multimask_output, return_logits, &features_in_model_);
  auto scores_of = [&](const DecoderGroup& g) { return ops::cast(ops::narrow(g.iou, 1, first, K), DType::F32); };
  if (groups.size() == 1) {  // one token count: the batch rows are the prompts in order, no reordering
    DecoderGroup& g = groups.front();
    out.masks = g.masks.front().reshape({B, K, H, W});
    out.scores = scores_of(g);
    out.low_res_logits = ops::cast(g.low_res, DType::F32);
    if (return_logits) out.logits = g.logits.front().reshape({B, K, H, W});
    return out;
  }
  // Prompts with different token counts decode in separate groups: scatter each group's rows back
  // to the prompts' order with device-to-device copies.
  out.masks = Tensor::empty({B, K, H, W}, DType::U8, model.device);
  out.scores = Tensor::empty({B, K}, DType::F32, model.device);
  out.low_res_logits = Tensor::empty({B, K, m4, m4}, DType::F32, model.device);
  if (return_logits) out.logits = Tensor::empty({B, K, H, W}, DType::F32, model.device);
  auto scatter = [&](Tensor& dst, const Tensor& src, const DecoderGroup& g) {
    const size_t row = src.nbytes() / g.members.size();  // one prompt's K planes
    for (size_t r = 0; r < g.members.size(); ++r)
      devmem::copy_rows(static_cast<char*>(dst.raw()) + g.members[r].second * row, row,
                        static_cast<const char*>(src.raw()) + r * row, row, row, 1, model.device);
  };
  for (const DecoderGroup& g : groups) {
    scatter(out.masks, g.masks.front(), g);
    scatter(out.scores, scores_of(g), g);
    scatter(out.low_res_logits, ops::cast(g.low_res, DType::F32), g);
    if (return_logits) scatter(out.logits, g.logits.front(), g);
  }
  return out;
}

std::vector<std::vector<Prediction>> predict_multi_image(const SamModel& model,
                                                         const std::vector<ImageEmbedding>& embeddings,
                                                         const std::vector<std::vector<Prompt>>& prompts,
                                                         bool multimask_output, bool return_logits) {
  VITRT_CHECK(embeddings.size() == prompts.size(), InvalidArgument, "predict_multi_image: ", embeddings.size(),
              " embeddings but ", prompts.size(), " prompt lists");
  const SamConfig& c = model.config;
  std::vector<const ImageEmbedding*> ptrs;
  for (const ImageEmbedding& e : embeddings) {
    VITRT_CHECK(e.model_fingerprint == model.fingerprint, InvalidArgument, "an embedding was computed by model '",
                e.model_fingerprint, "', not by this model '", model.fingerprint, "'");
    e.features.expect_shape({1, c.out_chans, c.grid_size(), c.grid_size()}, "image embedding");
    auto [ih, iw] = preprocess_shape(e.original_height, e.original_width, c.img_size);
    VITRT_CHECK(e.original_height > 0 && e.original_width > 0 && e.input_height == ih && e.input_width == iw,
                InvalidArgument, "embedding sizes are inconsistent: original ", e.original_height, "x",
                e.original_width, ", input ", e.input_height, "x", e.input_width);
    ptrs.push_back(&e);
  }
  return decode_prompts(model, ptrs, prompts, multimask_output, return_logits);
}

}  // namespace vitrt
