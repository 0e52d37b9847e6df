// SAM mask decoder (segment_anything/modeling/mask_decoder.py, transformer.py): a two-way
// transformer between prompt tokens and image tokens, transposed-conv upscaling of the image
// tokens, one hypernetwork MLP per mask token, and the IoU head.
#include <cstring>

#include "models/sam/decoder_graph.h"
#include "models/sam/sam_model.h"
#include "models/sam/weights.h"
#include "ops/op_profiler.h"
#include "ops/ops.h"

namespace vitrt::sam {

namespace {
constexpr float kDecoderEps = 1e-5f;      // nn.LayerNorm default in the two-way transformer
constexpr float kLayerNorm2dEps = 1e-6f;  // LayerNorm2d in output_upscaling

NormW take_norm(WeightReader& r, const std::string& p, int64_t dim) {
  return {r.take(p + ".weight", {dim}), r.take(p + ".bias", {dim})};
}
LinearW take_linear(WeightReader& r, const std::string& p, int64_t out, int64_t in) {
  return {r.take(p + ".weight", {out, in}), r.take(p + ".bias", {out})};
}
DecoderAttentionW take_attention(WeightReader& r, const std::string& p, int64_t dim, int64_t inner) {
  return {take_linear(r, p + ".q_proj", inner, dim), take_linear(r, p + ".k_proj", inner, dim),
          take_linear(r, p + ".v_proj", inner, dim), take_linear(r, p + ".out_proj", dim, inner)};
}

// transformer.Attention: project, attend per head, project back.
Tensor attend_heads(const DecoderAttentionW& a, int heads, const Tensor& q, const Tensor& k, const Tensor& v) {
  Tensor qp = ops::linear(q, a.q.w, a.q.bias());
  Tensor kp = ops::linear(k, a.k.w, a.k.bias());
  Tensor vp = ops::linear(v, a.v.w, a.v.bias());
  return ops::attention(qp, kp, vp, heads);
}
Tensor attend(const DecoderAttentionW& a, int heads, const Tensor& q, const Tensor& k, const Tensor& v) {
  return ops::linear(attend_heads(a, heads, q, k, v), a.out.w, a.out.bias());
}
// The projections of the per-prompt image side of an attention whose input is keys + key_pe
// (keys [B, HW, D], key_pe [HW, D], shared): (keys + key_pe) W^T + b = keys W^T + (key_pe W^T + b),
// the second term once per call and added by the GEMM (ops::linear_broadcast_add), so that the
// [B, HW, D] sum keys + key_pe is never formed (a read and a write of it per use).
Tensor project_with_pe(const LinearW& l, const Tensor& keys, const Tensor& key_pe) {
  return ops::linear_broadcast_add(keys, l.w, ops::linear(key_pe, l.w, l.bias()));
}

// An attention's k of keys + key_pe and v of keys in one GEMM over the keys (one read of them, not
// two): [k | v] = keys [Wk; Wv]^T + [key_pe Wk^T + bk | bv] -> [B, HW, 2 inner], for
// ops::attention_packed_kv. The v half of the added term is the bias alone, made as the projection of
// zeros (0 * key_pe, exact) so that every step stays a device operator (capturable).
Tensor project_kv_with_pe(const DecoderAttentionW& a, const Tensor& keys, const Tensor& key_pe) {
  Tensor zeros = ops::copy(key_pe);
  ops::scale_(zeros, 0.f);
  const Tensor added =
      ops::cat({ops::linear(key_pe, a.k.w, a.k.bias()), ops::linear(zeros, a.v.w, a.v.bias())}, 1);
  return ops::linear_broadcast_add(keys, ops::cat({a.k.w, a.v.w}, 0), added);
}

// The token-to-image attention over per-prompt keys: queries q [B, T, D], keys [B, HW, D].
Tensor attend_tokens_to_keys(const DecoderAttentionW& a, int heads, const Tensor& q, const Tensor& keys,
                             const Tensor& key_pe) {
  const Tensor qp = ops::linear(q, a.q.w, a.q.bias());
  const Tensor out = ops::attention_packed_kv(qp, project_kv_with_pe(a, keys, key_pe), heads);
  return ops::linear(out, a.out.w, a.out.bias());
}

// Repeats `block` [1, ...] n times along the batch (by doubling: log n copies).
Tensor repeat_batch(const Tensor& block, int64_t n) {
  Tensor r = block;
  while (r.size(0) * 2 <= n) r = ops::cat({r, r}, 0);
  if (r.size(0) < n) r = ops::cat({r, r.slice0(0, n - r.size(0))}, 0);
  return r;
}

// One entry per image [images, ...] -> one per prompt [B, ...]: entry i repeated counts[i] times.
Tensor repeat_per_image(const Tensor& per_image, const std::vector<int64_t>& counts) {
  std::vector<Tensor> parts;
  for (size_t i = 0; i < counts.size(); ++i) {
    const int64_t img = static_cast<int64_t>(i);
    parts.push_back(repeat_batch(per_image.slice0(img, img + 1), counts[i]));
  }
  return parts.size() == 1 ? parts[0] : ops::cat(parts, 0);
}

// attend() for queries [B, T, D] grouped by image (counts[i] prompts of image i in a row) whose
// keys and values are one per image ([images, N, D]): all the tokens of an image's prompts form one
// query sequence against that image's keys. Each query row gets exactly what it would against a
// copy of the keys per prompt, without the copies and with the k / v projections once per image.
Tensor attend_keys_per_image(const DecoderAttentionW& a, int heads, const Tensor& q, const Tensor& keys,
                             const Tensor& key_pe, const std::vector<int64_t>& counts) {
  const int64_t T = q.size(1);
  const Tensor qp = ops::linear(q, a.q.w, a.q.bias());
  const Tensor kp = project_with_pe(a.k, keys, key_pe);
  const Tensor vp = ops::linear(keys, a.v.w, a.v.bias());
  const int64_t inner = qp.size(2);
  std::vector<Tensor> outs;
  for (size_t i = 0, b0 = 0; i < counts.size(); b0 += counts[i], ++i) {
    const int64_t n = counts[i], img = static_cast<int64_t>(i);
    outs.push_back(ops::attention(qp.slice0(b0, b0 + n).reshape({1, n * T, inner}), kp.slice0(img, img + 1),
                                  vp.slice0(img, img + 1), heads)
                       .reshape({n, T, inner}));
  }
  return ops::linear(outs.size() == 1 ? outs[0] : ops::cat(outs, 0), a.out.w, a.out.bias());
}

// The image-to-token attention with the image side one per image (queries from keys + key_pe,
// keys [images, N, D] also the residual) and the token side per prompt (k_tokens, v_tokens [B, T, D]):
// returns keys + attention for every prompt, [B, N, D]. The query projection runs once per image
// (one image: its queries serve every prompt's attention as they are; several: repeated per
// prompt); the per-prompt keys come out of the residual add, never from copying the image's keys.
Tensor image_to_token_keys_per_image(const DecoderAttentionW& a, int heads, const Tensor& keys, const Tensor& key_pe,
                                     const Tensor& k_tokens, const Tensor& v_tokens,
                                     const std::vector<int64_t>& counts) {
  const Tensor qp_image = project_with_pe(a.q, keys, key_pe);
  const Tensor qp = counts.size() == 1 ? qp_image : repeat_per_image(qp_image, counts);
  const Tensor kp = ops::linear(k_tokens, a.k.w, a.k.bias());
  const Tensor vp = ops::linear(v_tokens, a.v.w, a.v.bias());
  Tensor out = ops::linear(ops::attention(qp, kp, vp, heads), a.out.w, a.out.bias());
  const int64_t N = keys.size(1), D = keys.size(2);
  for (size_t i = 0, b0 = 0; i < counts.size(); b0 += counts[i], ++i) {
    const int64_t img = static_cast<int64_t>(i);
    Tensor part = out.slice0(b0, b0 + counts[i]);  // a view: the sum lands in out
    ops::add_(part, keys.slice0(img, img + 1).reshape({N, D}));
  }
  return out;
}

// MLP of mask_decoder.py: ReLU between layers, none after the last.
Tensor mlp(const std::vector<LinearW>& layers, Tensor x) {
  for (size_t i = 0; i < layers.size(); ++i)
    x = ops::linear(x, layers[i].w, layers[i].bias(),
                    i + 1 < layers.size() ? ops::Activation::ReLU : ops::Activation::None);
  return x;
}

std::vector<LinearW> take_mlp(WeightReader& r, const std::string& p, int64_t in, int64_t hidden, int64_t out, int depth) {
  std::vector<LinearW> layers;
  for (int i = 0; i < depth; ++i)
    layers.push_back(take_linear(r, p + ".layers." + std::to_string(i), i + 1 < depth ? hidden : out,
                                 i == 0 ? in : hidden));
  return layers;
}
}  // namespace

void MaskDecoder::load(WeightReader& r, const SamConfig& c) {
  cfg = c;
  const int64_t D = c.out_chans, inner = D / c.attention_downsample_rate, M = c.num_multimask_outputs + 1;
  const std::string p = "mask_decoder.";
  layers.resize(c.decoder_depth);
  for (int i = 0; i < c.decoder_depth; ++i) {
    const std::string lp = p + "transformer.layers." + std::to_string(i) + ".";
    DecoderLayerW& l = layers[i];
    l.self_attn = take_attention(r, lp + "self_attn", D, D);
    l.cross_token_to_image = take_attention(r, lp + "cross_attn_token_to_image", D, inner);
    l.cross_image_to_token = take_attention(r, lp + "cross_attn_image_to_token", D, inner);
    l.norm1 = take_norm(r, lp + "norm1", D);
    l.norm2 = take_norm(r, lp + "norm2", D);
    l.norm3 = take_norm(r, lp + "norm3", D);
    l.norm4 = take_norm(r, lp + "norm4", D);
    l.lin1 = take_linear(r, lp + "mlp.lin1", c.decoder_mlp_dim, D);
    l.lin2 = take_linear(r, lp + "mlp.lin2", D, c.decoder_mlp_dim);
  }
  final_attn = take_attention(r, p + "transformer.final_attn_token_to_image", D, inner);
  norm_final = take_norm(r, p + "transformer.norm_final_attn", D);
  iou_token = r.take(p + "iou_token.weight", {1, D});
  mask_tokens = r.take(p + "mask_tokens.weight", {M, D});
  output_tokens_host = ops::cat({iou_token, mask_tokens}, 0);  // [1 + M, D]
  up1_w = r.take(p + "output_upscaling.0.weight", {D, D / 4, 2, 2});
  up1_b = r.take(p + "output_upscaling.0.bias", {D / 4});
  up_norm = take_norm(r, p + "output_upscaling.1", D / 4);
  up2_w = r.take(p + "output_upscaling.3.weight", {D / 4, D / 8, 2, 2});
  up2_b = r.take(p + "output_upscaling.3.bias", {D / 8});
  hyper_mlps.clear();
  for (int64_t i = 0; i < M; ++i)
    hyper_mlps.push_back(take_mlp(r, p + "output_hypernetworks_mlps." + std::to_string(i), D, D, D / 8, 3));
  iou_head = take_mlp(r, p + "iou_prediction_head", D, c.iou_head_hidden_dim, M, c.iou_head_depth);
}

namespace {
// The prompt counts per image of a batch of B prompts on image [I, ...] (null: all on one image),
// checked.
std::vector<int64_t> checked_prompt_counts(const Tensor& image, int64_t B,
                                           const std::vector<int64_t>* prompts_per_image) {
  const int64_t I = image.size(0);
  std::vector<int64_t> per_image = prompts_per_image ? *prompts_per_image : std::vector<int64_t>{B};
  VITRT_CHECK(static_cast<int64_t>(per_image.size()) == I, InvalidArgument, "mask decoder: ", I,
              " image embeddings but prompt counts for ", per_image.size());
  int64_t total = 0;
  for (int64_t n : per_image) {
    VITRT_CHECK(n >= 0, InvalidArgument, "mask decoder: negative prompt count");
    total += n;
  }
  VITRT_CHECK(total == B, InvalidArgument, "mask decoder: prompt counts sum to ", total, ", the batch holds ", B);
  return per_image;
}
}  // namespace

void MaskDecoder::forward(const Tensor& image, const Tensor& image_pe, const Tensor& sparse, const Tensor& dense,
                          Tensor& masks_out, Tensor& iou_out, const std::vector<int64_t>* prompts_per_image) const {
  Tensor masks, iou;
  const std::vector<int64_t> per_image = checked_prompt_counts(image, sparse.size(0), prompts_per_image);
  forward_kept(image, image_pe, sparse, dense, /*dense_shared=*/false, per_image, masks, iou);
  const int64_t g = cfg.grid_size();
  masks_out = ops::cast(masks, DType::F32).to(Device::CPU).reshape({masks.size(0), masks.size(1), 4 * g, 4 * g});
  iou_out = ops::cast(iou, DType::F32).to(Device::CPU);
}

void MaskDecoder::forward_shared_dense(const Tensor& image, const Tensor& image_pe, const Tensor& sparse,
                                       const Tensor& dense_one, Tensor& masks, Tensor& iou,
                                       const std::vector<int64_t>* prompts_per_image, int64_t first_mask,
                                       int64_t num_masks) const {
  const int64_t num_mask_tokens = mask_tokens.size(0), g = cfg.grid_size();
  if (num_masks < 0) num_masks = num_mask_tokens - first_mask;
  VITRT_CHECK(first_mask >= 0 && num_masks >= 1 && first_mask + num_masks <= num_mask_tokens, InvalidArgument,
              "mask decoder: mask outputs ", first_mask, " .. ", first_mask + num_masks - 1,
              " requested, the model has ", num_mask_tokens);
  const int64_t B = sparse.size(0);
  const std::vector<int64_t> per_image = checked_prompt_counts(image, B, prompts_per_image);
  const Device dev = mask_tokens.device();
  const DType dt = mask_tokens.dtype();
  auto in_model = [&](const Tensor& t) { return t.device() == dev && t.dtype() == dt; };
  // The graphed path reads image_pe and dense_one in place and needs every input on the device
  // (an upload cannot sit in a graph); the op profiler times eager launches only.
  if (dev == Device::CUDA && graphs->enabled() && !ops::profiler::enabled() && B > 0 && in_model(image) &&
      in_model(image_pe) && in_model(dense_one)) {
    DecoderGraphCall call;
    call.shape.batch = B;
    call.shape.tokens = output_tokens_host.size(0) + sparse.size(1);
    call.shape.first_mask = first_mask;
    call.shape.num_masks = num_masks;
    call.shape.image_pe = image_pe.raw();
    call.shape.dense = dense_one.raw();
    for (int64_t i = 0; i < image.size(0); ++i) {
      if (per_image[i] == 0) continue;  // an image without prompts is not decoded
      call.shape.prompts_per_image.push_back(per_image[i]);
      call.images.push_back(image.slice0(i, i + 1));
    }
    call.tokens_host = prompt_tokens_host(sparse);
    call.dtype = dt;
    call.num_mask_tokens = num_mask_tokens;
    call.plane = 16 * g * g;
    graphs->run(
        call,
        [&](const Tensor& image_in, const Tensor& tokens_in, Tensor& masks_all, Tensor& iou_all) {
          forward_device(image_in, image_pe, tokens_in, dense_one, /*dense_shared=*/true,
                         call.shape.prompts_per_image, masks_all, iou_all);
        },
        masks, iou);
  } else {
    Tensor masks_all;
    forward_kept(image, image_pe, sparse, dense_one, /*dense_shared=*/true, per_image, masks_all, iou);
    masks = num_masks == num_mask_tokens ? masks_all : ops::narrow(masks_all, 1, first_mask, num_masks);
  }
  masks = masks.reshape({B, num_masks, 4 * g, 4 * g});
}

Tensor MaskDecoder::prompt_tokens_host(const Tensor& sparse) const {
  const int64_t D = cfg.out_chans, M = output_tokens_host.size(0);
  const int64_t B = sparse.size(0), n_sparse = sparse.size(1), T = M + n_sparse;
  Tensor tokens = Tensor::empty({B, T, D});
  for (int64_t b = 0; b < B; ++b) {
    float* t = tokens.data<float>() + b * T * D;
    std::memcpy(t, output_tokens_host.data<float>(), sizeof(float) * M * D);
    std::memcpy(t + M * D, sparse.data<float>() + b * n_sparse * D, sizeof(float) * n_sparse * D);
  }
  return tokens;
}

void MaskDecoder::forward_kept(const Tensor& image, const Tensor& image_pe, const Tensor& sparse, const Tensor& dense,
                               bool dense_shared, const std::vector<int64_t>& prompts_per_image, Tensor& masks_out,
                               Tensor& iou_out) const {
  // Device-agnostic: image, image_pe and the weights may live on the GPU; sparse and dense come
  // from the (CPU, float32) prompt encoder and are moved next to the weights here.
  const Device dev = mask_tokens.device();
  const DType dt = mask_tokens.dtype();
  auto to_model = [&](const Tensor& host) { return ops::cast(host.to(dev), dt); };
  forward_device(image, image_pe, to_model(prompt_tokens_host(sparse)), to_model(dense), dense_shared,
                 prompts_per_image, masks_out, iou_out);
}

void MaskDecoder::forward_device(const Tensor& image, const Tensor& image_pe, const Tensor& tokens,
                                 const Tensor& dense, bool dense_shared, const std::vector<int64_t>& per_image,
                                 Tensor& masks_out, Tensor& iou_out) const {
  const DType dt = mask_tokens.dtype();
  const int64_t D = cfg.out_chans, g = cfg.grid_size(), HW = g * g, M = output_tokens_host.size(0);
  const int64_t B = tokens.size(0);
  // tokens = [iou_token, mask_tokens, sparse prompt tokens] per batch entry.
  const Tensor query_pe = ops::cast(tokens, dt);
  // src = image embedding (as tokens) + dense prompt embedding; pos_src = image_pe (broadcast).
  const int64_t I = image.size(0);
  // [I, HW, D]: each image's embedding as tokens.
  Tensor image_tokens = ops::permute(image.reshape({I, D, HW}), {0, 2, 1});
  Tensor keys;
  // With one dense embedding for all prompts, every prompt of an image starts from the same keys:
  // until layer 0's image-to-token attention makes them differ, `keys` holds one [HW, D] per image
  // with prompts (counts: how many), and the image-side work of layer 0 runs once per image.
  bool keys_per_image = dense_shared;
  std::vector<int64_t> counts;
  if (dense_shared) {
    // The same element-wise sums as below, once per image.
    const Tensor dense_model = dense.reshape({1, HW, D});
    std::vector<Tensor> parts;
    for (int64_t i = 0; i < I; ++i) {
      if (per_image[i] == 0) continue;
      parts.push_back(ops::add(dense_model, image_tokens.slice0(i, i + 1).reshape({HW, D})));
      counts.push_back(per_image[i]);
    }
    keys = parts.size() == 1 ? parts[0] : ops::cat(parts, 0);
  } else {
    keys = dense;
    if (I == 1) {
      ops::add_(keys, image_tokens.reshape({HW, D}));
    } else {
      for (int64_t i = 0, b0 = 0; i < I; b0 += per_image[i], ++i) {
        if (per_image[i] == 0) continue;
        Tensor part = keys.slice0(b0, b0 + per_image[i]);  // a view: the sum lands in keys
        ops::add_(part, image_tokens.slice0(i, i + 1).reshape({HW, D}));
      }
    }
  }
  const Tensor& key_pe = image_pe;  // [HW, D], broadcast over the batch by ops::add

  // TwoWayTransformer.
  const int heads = cfg.decoder_heads;
  Tensor queries = ops::copy(query_pe);  // query_pe must stay the original tokens (stream-ordered: capturable)
  for (size_t i = 0; i < layers.size(); ++i) {
    const DecoderLayerW& l = layers[i];
    if (i == 0) {  // skip_first_layer_pe: the first self-attention replaces the queries
      queries = attend(l.self_attn, heads, queries, queries, queries);
    } else {
      Tensor q = ops::add(queries, query_pe);
      Tensor a = attend(l.self_attn, heads, q, q, queries);
      ops::add_(queries, a);
    }
    queries = ops::layer_norm(queries, l.norm1.w, l.norm1.b, kDecoderEps);

    Tensor q = ops::add(queries, query_pe);
    // keys + key_pe feeds both cross attentions of the layer (keys only change after the second);
    // the projections take key_pe's share through their GEMM (project_with_pe), never forming it.
    if (keys_per_image) {
      ops::add_(queries, attend_keys_per_image(l.cross_token_to_image, heads, q, keys, key_pe, counts));
    } else {
      ops::add_(queries, attend_tokens_to_keys(l.cross_token_to_image, heads, q, keys, key_pe));
    }
    queries = ops::layer_norm(queries, l.norm2.w, l.norm2.b, kDecoderEps);

    Tensor hidden = ops::linear(queries, l.lin1.w, l.lin1.bias(), ops::Activation::ReLU);
    queries = ops::linear(hidden, l.lin2.w, l.lin2.bias(), ops::Activation::None, &queries);
    queries = ops::layer_norm(queries, l.norm3.w, l.norm3.b, kDecoderEps);

    q = ops::add(queries, query_pe);
    if (keys_per_image) {
      keys = image_to_token_keys_per_image(l.cross_image_to_token, heads, keys, key_pe, q, queries, counts);
      keys_per_image = false;  // from here on one set of keys per prompt
    } else {
      const DecoderAttentionW& a = l.cross_image_to_token;
      const Tensor qp = project_with_pe(a.q, keys, key_pe);
      const Tensor kp = ops::linear(q, a.k.w, a.k.bias());
      const Tensor vp = ops::linear(queries, a.v.w, a.v.bias());
      ops::linear_add_(keys, ops::attention(qp, kp, vp, heads), a.out.w, a.out.bias());
    }
    keys = ops::layer_norm(keys, l.norm4.w, l.norm4.b, kDecoderEps);
  }
  if (keys_per_image) keys = repeat_per_image(keys, counts);  // no transformer layers (not a SAM shape)
  {
    Tensor q = ops::add(queries, query_pe);
    ops::add_(queries, attend_tokens_to_keys(final_attn, heads, q, keys, key_pe));
    queries = ops::layer_norm(queries, norm_final.w, norm_final.b, kDecoderEps);
  }

  // Upscale image tokens 4x: [B, g, g, D] -> [B, 2g, 2g, D/4] here, the second layer (-> [B, 4g, 4g,
  // D/8]) together with the masks below.
  Tensor up = ops::conv_transpose2x2_nhwc(keys.reshape({B, g, g, D}), up1_w, &up1_b);
  up = ops::layer_norm(up, up_norm.w, up_norm.b, kLayerNorm2dEps, std::nullopt, ops::Activation::GELU);

  // Hypernetworks: one MLP per mask token gives the weights of a per-pixel dot product.
  const int64_t C8 = D / 8;
  Tensor by_token = ops::permute(queries, {1, 0, 2});  // [T, B, D]: token rows are contiguous per batch
  std::vector<Tensor> hyper_rows;
  for (int64_t m = 0; m + 1 < M; ++m)
    hyper_rows.push_back(mlp(hyper_mlps[m], by_token.slice0(1 + m, 2 + m).reshape({B, D})).reshape({B, 1, C8}));
  Tensor hyper = ops::cat(hyper_rows, 1);  // [B, M-1, C8]
  // masks = hyper @ GELU(second upscaling)^T per prompt: [B, M-1, 16 HW], the upscaled embedding
  // itself never stored on the GPU (ops::conv_transpose2x2_dot).
  Tensor masks = ops::conv_transpose2x2_dot(up, up2_w, &up2_b, ops::Activation::GELU, hyper);
  Tensor iou = mlp(iou_head, by_token.slice0(0, 1).reshape({B, D}));
  masks_out = masks;
  iou_out = iou;
}

}  // namespace vitrt::sam
