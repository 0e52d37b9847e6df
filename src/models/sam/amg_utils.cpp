#include "models/sam/amg_utils.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <numeric>

#include "core/rounding.h"
#include "ops/cpu/interpolate.h"
#include "vitrt/error.h"

namespace vitrt::amg {

namespace {


// C's (int) cast of a double as x86 performs it (cvttsd2si): NaN and out-of-range values give
// INT_MIN. pycocotools relies on it for degenerate polygon edges (0 / 0 slopes).
inline int c_int(double v) {
  if (!(v > -2147483649.0 && v < 2147483648.0)) return INT_MIN;
  return static_cast<int>(v);
}

}  // namespace

// ---- point grids and crops ------------------------------------------------------------------

PointGrid build_point_grid(int n) {
  VITRT_CHECK(n >= 1, InvalidArgument, "a point grid needs at least 1 point per side, got ", n);
  // np.linspace(offset, 1 - offset, n): y = i * step + start, the last one set to stop.
  const double offset = 1.0 / (2 * n);
  const double start = offset, stop = 1 - offset;
  const double delta = stop - start;
  std::vector<double> side(n);
  const int div = n - 1;
  for (int i = 0; i < n; ++i) {
    double y;
    if (div > 0) {
      const double step = delta / div;
      y = step == 0 ? rounded(static_cast<double>(i) / div) * delta : rounded(static_cast<double>(i) * step);
    } else {
      y = rounded(static_cast<double>(i) * delta);
    }
    side[i] = y + start;
  }
  if (n > 1) side[n - 1] = stop;
  PointGrid grid(static_cast<size_t>(n) * n);
  for (int r = 0; r < n; ++r)
    for (int c = 0; c < n; ++c) grid[static_cast<size_t>(r) * n + c] = {side[c], side[r]};
  return grid;
}

std::vector<PointGrid> build_all_layer_point_grids(int n_per_side, int n_layers, int scale_per_layer) {
  std::vector<PointGrid> grids;
  for (int i = 0; i <= n_layers; ++i) {
    // int(n_per_side / (scale_per_layer ** i)) in Python: float division, truncation.
    const double n = static_cast<double>(n_per_side) / std::pow(static_cast<double>(scale_per_layer), i);
    const int n_points = static_cast<int>(n);
    VITRT_CHECK(n_points >= 1, InvalidArgument, "crop layer ", i, " would get int(", n_per_side, " / ",
                scale_per_layer, "^", i, ") = 0 points per side: lower crop_n_layers or "
                "crop_n_points_downscale_factor, or raise points_per_side");
    grids.push_back(build_point_grid(n_points));
  }
  return grids;
}

std::vector<CropBox> generate_crop_boxes(int im_h, int im_w, int n_layers, double overlap_ratio) {
  std::vector<CropBox> boxes;
  const int short_side = std::min(im_h, im_w);
  boxes.push_back({0, 0, im_w, im_h, 0});
  auto crop_len = [](int orig_len, int n_crops, int overlap) {
    return static_cast<int>(std::ceil(static_cast<double>(overlap * (n_crops - 1) + orig_len) / n_crops));
  };
  for (int i_layer = 0; i_layer < n_layers; ++i_layer) {
    const int n_crops = 1 << (i_layer + 1);
    const int overlap = static_cast<int>(rounded(overlap_ratio * short_side) * (2.0 / n_crops));
    const int crop_w = crop_len(im_w, n_crops, overlap);
    const int crop_h = crop_len(im_h, n_crops, overlap);
    for (int i = 0; i < n_crops; ++i)      // x0 outer,
      for (int j = 0; j < n_crops; ++j) {  // y0 inner (itertools.product)
        const int x0 = (crop_w - overlap) * i, y0 = (crop_h - overlap) * j;
        boxes.push_back({x0, y0, std::min(x0 + crop_w, im_w), std::min(y0 + crop_h, im_h), i_layer + 1});
      }
  }
  return boxes;
}

// ---- stability, boxes, NMS ------------------------------------------------------------------

float stability_score(int32_t intersections, int32_t unions) {
  return static_cast<float>(intersections) / static_cast<float>(unions);
}

float calculate_stability_score(const float* logits, int h, int w, double mask_threshold, double offset) {
  const float hi = static_cast<float>(mask_threshold + offset), lo = static_cast<float>(mask_threshold - offset);
  int32_t inter = 0, uni = 0;
  for (int y = 0; y < h; ++y) {
    const float* row = logits + static_cast<size_t>(y) * w;
    int32_t ri = 0, ru = 0;
    for (int x = 0; x < w; ++x) {
      ri += row[x] > hi;
      ru += row[x] > lo;
    }
    inter += static_cast<int16_t>(ri);
    uni += static_cast<int16_t>(ru);
  }
  return stability_score(inter, uni);
}

std::vector<int64_t> nms(const std::vector<BoxF>& boxes, const std::vector<float>& scores, double iou_threshold) {
  VITRT_CHECK(boxes.size() == scores.size(), InvalidArgument, "nms: ", boxes.size(), " boxes but ", scores.size(),
              " scores");
  const size_t n = boxes.size();
  std::vector<float> areas(n);
  for (size_t i = 0; i < n; ++i) areas[i] = (boxes[i][2] - boxes[i][0]) * (boxes[i][3] - boxes[i][1]);
  // scores.sort(stable=True, descending=True); NaN sorts first, as in torch.
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    const float sa = scores[a], sb = scores[b];
    return (std::isnan(sa) && !std::isnan(sb)) || sa > sb;
  });
  std::vector<uint8_t> suppressed(n, 0);
  std::vector<int64_t> keep;
  for (size_t oi = 0; oi < n; ++oi) {
    const int64_t i = order[oi];
    if (suppressed[i]) continue;
    keep.push_back(i);
    const BoxF& bi = boxes[i];
    for (size_t oj = oi + 1; oj < n; ++oj) {
      const int64_t j = order[oj];
      if (suppressed[j]) continue;
      const BoxF& bj = boxes[j];
      const float xx1 = std::max(bi[0], bj[0]), yy1 = std::max(bi[1], bj[1]);
      const float xx2 = std::min(bi[2], bj[2]), yy2 = std::min(bi[3], bj[3]);
      const float w = std::max(0.0f, xx2 - xx1), h = std::max(0.0f, yy2 - yy1);
      const float inter = rounded(w * h);
      const float ovr = inter / (areas[i] + areas[j] - inter);
      if (static_cast<double>(ovr) > iou_threshold) suppressed[j] = 1;
    }
  }
  return keep;
}

std::vector<int64_t> batched_nms(const std::vector<BoxF>& boxes, const std::vector<float>& scores,
                                 double iou_threshold) {
  std::vector<int64_t> keep = nms(boxes, scores, iou_threshold);
  if (boxes.size() * 4 <= 4000) return keep;  // _batched_nms_coordinate_trick: nms's own order
  // _batched_nms_vanilla: the kept indices in ascending order, then
  // keep_indices[scores[keep_indices].sort(descending=True)[1]], an unstable std::sort in torch
  // over (value, position) pairs with its KeyValueCompDesc; the same call here gives the same
  // order with the same standard library.
  std::sort(keep.begin(), keep.end());
  std::vector<std::pair<float, int64_t>> kv(keep.size());
  for (size_t i = 0; i < keep.size(); ++i) kv[i] = {scores[keep[i]], static_cast<int64_t>(i)};
  std::sort(kv.begin(), kv.end(), [](const std::pair<float, int64_t>& a, const std::pair<float, int64_t>& b) {
    return (std::isnan(a.first) && !std::isnan(b.first)) || a.first > b.first;
  });
  std::vector<int64_t> out(keep.size());
  for (size_t i = 0; i < kv.size(); ++i) out[i] = keep[kv[i].second];
  return out;
}

bool is_box_near_crop_edge(const std::array<int64_t, 4>& b, const CropBox& crop, int orig_w, int orig_h, float atol) {
  const float box[4] = {static_cast<float>(b[0] + crop.x0), static_cast<float>(b[1] + crop.y0),
                        static_cast<float>(b[2] + crop.x0), static_cast<float>(b[3] + crop.y0)};
  const float cb[4] = {static_cast<float>(crop.x0), static_cast<float>(crop.y0), static_cast<float>(crop.x1),
                       static_cast<float>(crop.y1)};
  const float ob[4] = {0.0f, 0.0f, static_cast<float>(orig_w), static_cast<float>(orig_h)};
  // torch.isclose(a, b, atol, rtol=0): a == b or |a - b| <= atol.
  auto close = [atol](float a, float c) { return a == c || std::fabs(a - c) <= atol; };
  for (int k = 0; k < 4; ++k)
    if (close(box[k], cb[k]) && !close(box[k], ob[k])) return true;
  return false;
}

std::array<int64_t, 4> mask_to_box(const uint8_t* mask, int h, int w) {
  int64_t x0 = w, y0 = h, x1 = -1, y1 = -1;
  for (int y = 0; y < h; ++y) {
    const uint8_t* row = mask + static_cast<size_t>(y) * w;
    int first = -1, last = -1;
    for (int x = 0; x < w; ++x)
      if (row[x]) {
        if (first < 0) first = x;
        last = x;
      }
    if (first < 0) continue;
    x0 = std::min<int64_t>(x0, first);
    x1 = std::max<int64_t>(x1, last);
    if (y0 == h) y0 = y;
    y1 = y;
  }
  if (x1 < 0) return {0, 0, 0, 0};
  return {x0, y0, x1, y1};
}

std::vector<uint32_t> rle_counts_uncropped(const uint8_t* m, int h, int w, int x0, int y0, int H, int W) {
  VITRT_CHECK(x0 >= 0 && y0 >= 0 && x0 + w <= W && y0 + h <= H, InvalidArgument, "crop ", w, "x", h, " at (", x0,
              ", ", y0, ") does not fit a ", W, "x", H, " image");
  std::vector<uint32_t> counts;
  uint8_t cur = 0;
  uint64_t run = 0;
  auto add = [&](uint8_t v, uint64_t len) {
    if (len == 0) return;
    if (v != cur) {
      counts.push_back(static_cast<uint32_t>(run));
      cur = v;
      run = 0;
    }
    run += len;
  };
  add(0, static_cast<uint64_t>(x0) * H);  // columns left of the crop
  for (int x = 0; x < w; ++x) {
    add(0, y0);
    const uint8_t* p = m + x;
    for (int y = 0; y < h; ++y, p += w) {
      const uint8_t v = *p != 0;
      if (v != cur) {
        counts.push_back(static_cast<uint32_t>(run));
        cur = v;
        run = 0;
      }
      ++run;
    }
    add(0, H - y0 - h);
  }
  add(0, static_cast<uint64_t>(W - x0 - w) * H);  // columns right of it
  counts.push_back(static_cast<uint32_t>(run));
  return counts;
}

// ---- small regions ----------------------------------------------------------------------------

int connected_components8(const uint8_t* mask, int h, int w, std::vector<int32_t>& labels,
                          std::vector<int64_t>& sizes) {
  const size_t n = static_cast<size_t>(h) * w;
  labels.assign(n, 0);
  // Two-pass union-find over provisional labels.
  std::vector<int32_t> parent(1, 0);
  auto find = [&](int32_t a) {
    while (parent[a] != a) {
      parent[a] = parent[parent[a]];
      a = parent[a];
    }
    return a;
  };
  auto unite = [&](int32_t a, int32_t b) {
    a = find(a);
    b = find(b);
    if (a != b) parent[std::max(a, b)] = std::min(a, b);
  };
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      const size_t i = static_cast<size_t>(y) * w + x;
      if (!mask[i]) continue;
      int32_t l = 0;
      auto take = [&](int yy, int xx) {
        if (yy < 0 || xx < 0 || xx >= w) return;
        const int32_t o = labels[static_cast<size_t>(yy) * w + xx];
        if (!o) return;
        if (!l)
          l = o;
        else
          unite(l, o);
      };
      take(y, x - 1);
      take(y - 1, x - 1);
      take(y - 1, x);
      take(y - 1, x + 1);
      if (!l) {
        l = static_cast<int32_t>(parent.size());
        parent.push_back(l);
      }
      labels[i] = l;
    }
  // Final labels in the order OpenCV's block-based labelling (Spaghetti/BBDT) numbers them: by
  // the first 2x2 block, in raster order of blocks, that holds a pixel of the component (all set
  // pixels of a 2x2 block are 8-connected, so a block belongs to one component).
  std::vector<int32_t> final_label(parent.size(), 0);
  int32_t next = 1;
  for (int by = 0; by < h; by += 2)
    for (int bx = 0; bx < w; bx += 2)
      for (int dy = 0; dy < 2 && by + dy < h; ++dy)
        for (int dx = 0; dx < 2 && bx + dx < w; ++dx) {
          const int32_t l = labels[static_cast<size_t>(by + dy) * w + bx + dx];
          if (!l) continue;
          const int32_t r = find(l);
          if (!final_label[r]) final_label[r] = next++;
        }
  sizes.assign(next, 0);
  for (size_t i = 0; i < n; ++i) {
    labels[i] = labels[i] ? final_label[find(labels[i])] : 0;
    ++sizes[labels[i]];
  }
  return next;
}

bool remove_small_regions(std::vector<uint8_t>& mask, int h, int w, double area_thresh, RegionMode mode) {
  const size_t n = static_cast<size_t>(h) * w;
  VITRT_CHECK(mask.size() == n, InvalidArgument, "remove_small_regions: mask of ", mask.size(), " bytes for ", w, "x",
              h);
  const bool holes = mode == RegionMode::Holes;
  std::vector<uint8_t> working(n);
  for (size_t i = 0; i < n; ++i) working[i] = static_cast<uint8_t>(holes ^ (mask[i] != 0));
  std::vector<int32_t> labels;
  std::vector<int64_t> sizes;
  const int n_labels = connected_components8(working.data(), h, w, labels, sizes);
  std::vector<uint8_t> small(n_labels, 0);
  bool any_small = false;
  for (int l = 1; l < n_labels; ++l)
    if (static_cast<double>(sizes[l]) < area_thresh) small[l] = 1, any_small = true;
  if (!any_small) return false;
  std::vector<uint8_t> fill(n_labels, 0);
  if (holes) {  // fill_labels = [0] + small regions
    fill[0] = 1;
    for (int l = 1; l < n_labels; ++l) fill[l] = small[l];
  } else {  // everything that is neither background nor small
    bool any = false;
    for (int l = 1; l < n_labels; ++l) any |= (fill[l] = !small[l]);
    if (!any) {  // every region is small: keep the largest (np.argmax: the first of equals)
      int best = 1;
      for (int l = 2; l < n_labels; ++l)
        if (sizes[l] > sizes[best]) best = l;
      fill[best] = 1;
    }
  }
  for (size_t i = 0; i < n; ++i) mask[i] = fill[labels[i]];
  return true;
}

// ---- mask upscaling --------------------------------------------------------------------------

// PyTorch's upsample_bilinear2d source taps (ops/cpu/interpolate.h), narrowed to 32-bit indices.
std::vector<LogitUpscaler::Tap> LogitUpscaler::taps(int64_t in, int64_t out) {
  std::vector<Tap> t;
  t.reserve(out);
  for (const cpu::LinearTaps& l : cpu::linear_taps(in, out))
    t.push_back(Tap{static_cast<int32_t>(l.i0), static_cast<int32_t>(l.i1), l.w0, l.w1});
  return t;
}

LogitUpscaler::LogitUpscaler(int low_res, int img_size, int input_h, int input_w, int out_h, int out_w)
    : m_(low_res), S_(img_size), ih_(input_h), iw_(input_w), out_h_(out_h), out_w_(out_w) {
  VITRT_CHECK(low_res > 0 && img_size > 0 && input_h > 0 && input_w > 0 && input_h <= img_size &&
                  input_w <= img_size && out_h > 0 && out_w > 0,
              InvalidArgument, "LogitUpscaler: bad sizes");
  ty1_ = taps(m_, S_);
  tx1_ = taps(m_, S_);
  ty2_ = taps(ih_, out_h_);
  tx2_ = taps(iw_, out_w_);
  // Columns of the first resize that the second one reads.
  std::vector<uint8_t> used(iw_, 0);
  for (const Tap& t : tx2_) used[t.i0] = used[t.i1] = 1;
  col_slot_.assign(iw_, -1);
  for (int c = 0; c < iw_; ++c)
    if (used[c]) col_slot_[c] = static_cast<int32_t>(cols1_.size()), cols1_.push_back(c);
  tx2c_ = tx2_;
  for (Tap& t : tx2c_) t.i0 = col_slot_[t.i0], t.i1 = col_slot_[t.i1];
  // Low-res rows read by the first-resize rows that the second one reads.
  std::vector<uint8_t> rows(ih_, 0), low(m_, 0);
  for (const Tap& t : ty2_) rows[t.i0] = rows[t.i1] = 1;
  for (int r = 0; r < ih_; ++r)
    if (rows[r]) low[ty1_[r].i0] = low[ty1_[r].i1] = 1;
  low_slot_.assign(m_, -1);
  for (int l = 0; l < m_; ++l)
    if (low[l]) low_slot_[l] = static_cast<int32_t>(low_rows_.size()), low_rows_.push_back(l);
}

void LogitUpscaler::prepare(const float* low_res, Scratch& s) const {
  const size_t nc = cols1_.size();
  s.low_h.resize(low_rows_.size() * nc);
  s.a_row.resize(nc);
  s.h2[0].resize(out_w_);
  s.h2[1].resize(out_w_);
  s.h2_row[0] = s.h2_row[1] = -1;
  s.out_row.resize(out_w_);
  // The first resize's horizontal pass ("top"/"bottom" in the fused kernel), per needed low row.
  for (size_t li = 0; li < low_rows_.size(); ++li) {
    const float* row = low_res + static_cast<size_t>(low_rows_[li]) * m_;
    float* o = s.low_h.data() + li * nc;
    for (size_t c = 0; c < nc; ++c) {
      const Tap& t = tx1_[cols1_[c]];
      o[c] = std::fma(t.w0, row[t.i0], t.w1 * row[t.i1]);
    }
  }
}

const float* LogitUpscaler::h2_row(int r, int keep, Scratch& s) const {
  for (int k = 0; k < 2; ++k)
    if (s.h2_row[k] == r) return s.h2[k].data();
  // Never evict the other row of this output row; otherwise the lower row (rows come in
  // increasing order, so the higher one may still be needed).
  const int slot = keep >= 0 ? (s.h2_row[0] == keep ? 1 : 0) : (s.h2_row[0] <= s.h2_row[1] ? 0 : 1);
  const size_t nc = cols1_.size();
  const Tap& v = ty1_[r];
  const float* top = s.low_h.data() + static_cast<size_t>(low_slot_[v.i0]) * nc;
  const float* bot = s.low_h.data() + static_cast<size_t>(low_slot_[v.i1]) * nc;
  float* a = s.a_row.data();
  for (size_t c = 0; c < nc; ++c) a[c] = std::fma(v.w0, top[c], v.w1 * bot[c]);
  float* h = s.h2[slot].data();
  for (int x = 0; x < out_w_; ++x) {
    const Tap& t = tx2c_[x];
    h[x] = std::fma(t.w0, a[t.i0], t.w1 * a[t.i1]);
  }
  s.h2_row[slot] = r;
  return h;
}

const float* LogitUpscaler::output_row(int y, Scratch& s) const {
  const Tap& v = ty2_[y];
  const float* top = h2_row(v.i0, -1, s);
  const float* bot = h2_row(v.i1, v.i0, s);
  float* o = s.out_row.data();
  for (int x = 0; x < out_w_; ++x) o[x] = std::fma(v.w0, top[x], v.w1 * bot[x]);
  return o;
}

void LogitUpscaler::run_plane(const float* low_res, Scratch& s, float* out) const {
  run(low_res, s, [&](int y, const float* row) {
    std::copy(row, row + out_w_, out + static_cast<size_t>(y) * out_w_);
  });
}

// ---- COCO -------------------------------------------------------------------------------------

std::vector<uint32_t> rle_from_polygon(const std::vector<double>& xy, int h, int w) {
  // A port of pycocotools' rleFrPoly (maskApi.c), keeping its integer types and casts.
  const size_t k = xy.size() / 2;
  const double scale = 5;
  std::vector<int> x(k + 1), y(k + 1);
  for (size_t j = 0; j < k; ++j) x[j] = c_int(rounded(scale * xy[j * 2 + 0]) + .5);
  for (size_t j = 0; j < k; ++j) y[j] = c_int(rounded(scale * xy[j * 2 + 1]) + .5);
  if (k == 0) return {static_cast<uint32_t>(static_cast<uint64_t>(h) * w)};
  x[k] = x[0];
  y[k] = y[0];
  std::vector<int> u, v;
  for (size_t j = 0; j < k; ++j) {
    int xs = x[j], xe = x[j + 1], ys = y[j], ye = y[j + 1];
    const int dx = std::abs(xe - xs), dy = std::abs(ys - ye);
    const bool flip = (dx >= dy && xs > xe) || (dx < dy && ys > ye);
    if (flip) std::swap(xs, xe), std::swap(ys, ye);
    const double s = dx >= dy ? static_cast<double>(ye - ys) / dx : static_cast<double>(xe - xs) / dy;
    if (dx >= dy) {
      for (int d = 0; d <= dx; ++d) {
        const int t = flip ? dx - d : d;
        u.push_back(t + xs);
        v.push_back(c_int(rounded(ys + rounded(s * t)) + .5));
      }
    } else {
      for (int d = 0; d <= dy; ++d) {
        const int t = flip ? dy - d : d;
        v.push_back(t + ys);
        u.push_back(c_int(rounded(xs + rounded(s * t)) + .5));
      }
    }
  }
  // Points along the y-boundary, downsampled.
  std::vector<int> bx, by;
  for (size_t j = 1; j < u.size(); ++j) {
    if (u[j] == u[j - 1]) continue;
    double xd = static_cast<double>(u[j] < u[j - 1] ? u[j] : u[j] - 1);
    xd = (xd + .5) / scale - .5;
    if (std::floor(xd) != xd || xd < 0 || xd > static_cast<double>(static_cast<uint64_t>(w) - 1)) continue;
    double yd = static_cast<double>(v[j] < v[j - 1] ? v[j] : v[j - 1]);
    yd = (yd + .5) / scale - .5;
    if (yd < 0)
      yd = 0;
    else if (yd > h)
      yd = h;
    yd = std::ceil(yd);
    bx.push_back(static_cast<int>(xd));
    by.push_back(static_cast<int>(yd));
  }
  std::vector<uint32_t> a(bx.size() + 1);
  for (size_t j = 0; j < bx.size(); ++j) a[j] = static_cast<uint32_t>(bx[j] * h + by[j]);
  a[bx.size()] = static_cast<uint32_t>(static_cast<uint64_t>(h) * w);
  std::sort(a.begin(), a.end());
  uint32_t p = 0;
  for (uint32_t& t : a) {
    const uint32_t cur = t;
    t -= p;
    p = cur;
  }
  std::vector<uint32_t> b;
  size_t j = 0;
  b.push_back(a[j++]);
  while (j < a.size()) {
    if (a[j] > 0) {
      b.push_back(a[j++]);
    } else {
      ++j;
      if (j < a.size()) b.back() += a[j++];
    }
  }
  return b;
}

std::vector<uint32_t> rle_from_bbox(const std::array<double, 4>& bb, int h, int w) {
  const double xs = bb[0], xe = xs + bb[2], ys = bb[1], ye = ys + bb[3];
  return rle_from_polygon({xs, ys, xs, ye, xe, ye, xe, ys}, h, w);
}

std::vector<uint32_t> rle_merge(const std::vector<std::vector<uint32_t>>& R, bool intersect) {
  // pycocotools' rleMerge (sizes are the caller's business here: all of one image).
  if (R.empty()) return {};
  if (R.size() == 1) return R[0];
  std::vector<uint32_t> cnts = R[0];
  for (size_t i = 1; i < R.size(); ++i) {
    const std::vector<uint32_t> A = cnts;
    const std::vector<uint32_t>& B = R[i];
    if (A.empty() || B.empty()) return {};
    cnts.clear();
    uint32_t ca = A[0], cb = B[0], cc = 0, ct = 1;
    int v = 0, va = 0, vb = 0;
    size_t a = 1, b = 1;
    while (ct > 0) {
      const uint32_t c = std::min(ca, cb);
      cc += c;
      ct = 0;
      ca -= c;
      if (!ca && a < A.size()) ca = A[a++], va = !va;
      ct += ca;
      cb -= c;
      if (!cb && b < B.size()) cb = B[b++], vb = !vb;
      ct += cb;
      const int vp = v;
      v = intersect ? (va && vb) : (va || vb);
      if (v != vp || ct == 0) cnts.push_back(cc), cc = 0;
    }
  }
  return cnts;
}

std::array<int, 2> center_point(const uint8_t* mask, int h, int w) {
  // scipy.ndimage.center_of_mass: exact integer sums, one float64 division per axis.
  int64_t count = 0, sy = 0, sx = 0;
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      if (mask[static_cast<size_t>(y) * w + x]) ++count, sy += y, sx += x;
  if (count == 0) return {-1, -1};
  // int(round(com, 0)): NumPy rounds half to even.
  const int cy = static_cast<int>(std::nearbyint(static_cast<double>(sy) / static_cast<double>(count)));
  const int cx = static_cast<int>(std::nearbyint(static_cast<double>(sx) / static_cast<double>(count)));
  if (mask[static_cast<size_t>(cy) * w + cx]) return {cx, cy};

  // Their fallback, loop for loop (the early stop only leaves the current row).
  auto at = [&](int y, int x) { return mask[static_cast<size_t>(y) * w + x] != 0; };
  constexpr int kGoodEnough = 20;
  int best = INT_MIN;
  std::array<int, 2> coords{-1, -1};
  for (int row = 0; row < h; ++row) {
    for (int col = 0; col < w; ++col) {
      if (!at(row, col)) continue;
      int r = row;
      while (r >= 0 && at(r, col)) --r;
      const int up = row - (r + 1);
      int c = col;
      while (c <= w - 1 && at(row, c)) ++c;
      const int right = (c - 1) - col;
      r = row;
      while (r <= h - 1 && at(r, col)) ++r;
      const int down = (r - 1) - row;
      c = col;
      while (c >= 0 && at(row, c)) --c;
      const int left = col - (c + 1);
      const int d = std::min(std::min(up, right), std::min(down, left));
      if (d > best) best = d, coords = {col, row};
      if (best >= kGoodEnough) break;
    }
  }
  return coords;
}

}  // namespace vitrt::amg
