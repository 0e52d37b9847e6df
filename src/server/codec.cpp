#include "server/codec.h"

#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <cstdlib>

#include "io/rle.h"
#include "vitrt/error.h"

namespace vitrt::server {

namespace {
constexpr char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
}

std::string base64_encode(const void* data, size_t size) {
  const auto* p = static_cast<const uint8_t*>(data);
  std::string out;
  out.reserve((size + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= size; i += 3) {
    const uint32_t v = (uint32_t(p[i]) << 16) | (uint32_t(p[i + 1]) << 8) | p[i + 2];
    out += kB64[v >> 18];
    out += kB64[(v >> 12) & 63];
    out += kB64[(v >> 6) & 63];
    out += kB64[v & 63];
  }
  if (size - i == 1) {
    const uint32_t v = uint32_t(p[i]) << 16;
    out += kB64[v >> 18];
    out += kB64[(v >> 12) & 63];
    out += "==";
  } else if (size - i == 2) {
    const uint32_t v = (uint32_t(p[i]) << 16) | (uint32_t(p[i + 1]) << 8);
    out += kB64[v >> 18];
    out += kB64[(v >> 12) & 63];
    out += kB64[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

std::vector<uint8_t> base64_decode(std::string_view text, const char* what) {
  if (text.rfind("data:", 0) == 0) {
    const size_t comma = text.find(',');
    VITRT_CHECK(comma != std::string_view::npos && text.substr(0, comma).find(";base64") != std::string_view::npos,
                InvalidArgument, what, ": a data: URL must be base64 (data:<type>;base64,<data>)");
    text.remove_prefix(comma + 1);
  }
  static const std::array<int8_t, 256> table = [] {
    std::array<int8_t, 256> t;
    t.fill(-1);
    for (int i = 0; i < 64; ++i) t[static_cast<uint8_t>(kB64[i])] = static_cast<int8_t>(i);
    return t;
  }();
  std::vector<uint8_t> out;
  out.reserve(text.size() / 4 * 3);
  uint32_t acc = 0;
  int bits = 0;
  size_t padding = 0, pos = 0;
  for (char ch : text) {
    ++pos;
    if (ch == ' ' || ch == '\n' || ch == '\r' || ch == '\t') continue;
    if (ch == '=') {
      ++padding;
      continue;
    }
    const int8_t v = table[static_cast<uint8_t>(ch)];
    VITRT_CHECK(v >= 0 && padding == 0, InvalidArgument, what, " is not valid base64 (character ", pos, ")");
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<uint8_t>((acc >> bits) & 0xFF));
    }
  }
  VITRT_CHECK(padding <= 2 && bits < 6, InvalidArgument, what, " is not valid base64 (bad length or padding)");
  return out;
}

std::string image_content_hash(const Image& rgb) {
  unsigned char digest[32];
  unsigned int len = 0;
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  VITRT_CHECK(ctx != nullptr, Error, "cannot allocate a SHA-256 context");
  const std::string header = std::to_string(rgb.width) + "x" + std::to_string(rgb.height) + "x" +
                             std::to_string(rgb.channels) + "\n";
  const bool ok = EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) == 1 &&
                  EVP_DigestUpdate(ctx, header.data(), header.size()) == 1 &&
                  EVP_DigestUpdate(ctx, rgb.pixels.data(), rgb.pixels.size()) == 1 &&
                  EVP_DigestFinal_ex(ctx, digest, &len) == 1;
  EVP_MD_CTX_free(ctx);
  VITRT_CHECK(ok, Error, "SHA-256 failed");
  static const char* hex = "0123456789abcdef";
  std::string id;
  for (int i = 0; i < 16; ++i) {
    id += hex[digest[i] >> 4];
    id += hex[digest[i] & 15];
  }
  return id;
}

MaskSummary summarize_mask(const uint8_t* mask, int h, int w) {
  MaskSummary out;
  std::vector<uint32_t> counts;
  uint8_t prev = 0;
  uint32_t run = 0;
  int64_t x0 = w, x1 = -1, y0 = h, y1 = -1;
  constexpr int kBlock = 64;  // columns per block: kBlock * h bytes stay in cache
  std::vector<uint8_t> cols(static_cast<size_t>(kBlock) * h);
  for (int bx = 0; bx < w; bx += kBlock) {
    const int nb = std::min(kBlock, w - bx);
    for (int y = 0; y < h; ++y) {  // transpose the block: cols[c * h + y] = mask[y][bx + c]
      const uint8_t* row = mask + static_cast<size_t>(y) * w + bx;
      for (int c = 0; c < nb; ++c) cols[static_cast<size_t>(c) * h + y] = row[c] != 0;
    }
    for (int c = 0; c < nb; ++c) {
      const uint8_t* col = cols.data() + static_cast<size_t>(c) * h;
      int first = -1, last = -1;
      for (int y = 0; y < h; ++y) {
        const uint8_t v = col[y];
        if (v != prev) {
          counts.push_back(run);
          run = 0;
          prev = v;
        }
        ++run;
        if (v) {
          if (first < 0) first = y;
          last = y;
          ++out.area;
        }
      }
      if (first >= 0) {
        x0 = std::min<int64_t>(x0, bx + c);
        x1 = bx + c;
        y0 = std::min<int64_t>(y0, first);
        y1 = std::max<int64_t>(y1, last);
      }
    }
  }
  counts.push_back(run);
  out.coco_counts = rle_to_string(counts);
  if (x1 >= 0) out.bbox = {x0, y0, x1 - x0 + 1, y1 - y0 + 1};
  return out;
}

std::vector<std::vector<int>> mask_to_polygons(const uint8_t* mask, int h, int w, size_t max_polygons) {
  // Every side between an inside pixel and an outside one (or the border) is a directed edge on
  // the (w+1) x (h+1) corner grid, oriented clockwise around the inside pixel (inside on the
  // right). Each corner then has 0, 1 or 2 outgoing edges (2 where two inside pixels touch only
  // diagonally), and following the edges yields closed loops: clockwise around components
  // (positive area with y pointing down), counter-clockwise around holes.
  const int W1 = w + 1;
  auto inside = [&](int x, int y) { return x >= 0 && y >= 0 && x < w && y < h && mask[static_cast<size_t>(y) * w + x]; };
  const size_t n_vertices = static_cast<size_t>(W1) * (h + 1);
  std::vector<int32_t> out1(n_vertices, -1), out2(n_vertices, -1);  // target vertex of outgoing edges
  auto add_edge = [&](int x0, int y0, int x1, int y1) {
    const size_t from = static_cast<size_t>(y0) * W1 + x0;
    const int32_t to = y1 * W1 + x1;
    (out1[from] < 0 ? out1[from] : out2[from]) = to;
  };
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      if (!mask[static_cast<size_t>(y) * w + x]) continue;
      if (!inside(x, y - 1)) add_edge(x, y, x + 1, y);          // top, heading east
      if (!inside(x + 1, y)) add_edge(x + 1, y, x + 1, y + 1);  // right, heading south
      if (!inside(x, y + 1)) add_edge(x + 1, y + 1, x, y + 1);  // bottom, heading west
      if (!inside(x - 1, y)) add_edge(x, y + 1, x, y);          // left, heading north
    }

  struct Loop {
    std::vector<int> pts;
    int64_t area2;
  };
  std::vector<Loop> loops;
  for (size_t start = 0; start < n_vertices; ++start) {
    while (out1[start] >= 0) {
      std::vector<int> corners;  // x, y of the corners where the direction changes
      const auto s = static_cast<int32_t>(start);
      int32_t v = s;
      int dx = 0, dy = 0, first_dx = 0, first_dy = 0;
      do {
        int32_t next;
        if (out2[v] >= 0) {
          // Two ways on: turn right (clockwise) so that diagonal neighbours stay separate loops.
          const int rx = -dy, ry = dx;
          const int32_t right = (v / W1 + ry) * W1 + (v % W1 + rx);
          if (out1[v] == right) {
            next = out1[v];
            out1[v] = out2[v];
          } else {
            next = out2[v];
          }
          out2[v] = -1;
        } else {
          next = out1[v];
          out1[v] = -1;
        }
        const int ndx = next % W1 - v % W1, ndy = next / W1 - v / W1;
        if (v == s) first_dx = ndx, first_dy = ndy;
        if (ndx != dx || ndy != dy) {
          corners.push_back(v % W1);
          corners.push_back(v / W1);
        }
        dx = ndx;
        dy = ndy;
        v = next;
      } while (v != s);
      // The start was recorded as a corner; it is none if the loop arrives heading the way it left.
      if (dx == first_dx && dy == first_dy) corners.erase(corners.begin(), corners.begin() + 2);
      int64_t area2 = 0;
      const size_t n = corners.size() / 2;
      for (size_t i = 0; i < n; ++i) {
        const size_t j = (i + 1) % n;
        area2 += static_cast<int64_t>(corners[2 * i]) * corners[2 * j + 1] -
                 static_cast<int64_t>(corners[2 * j]) * corners[2 * i + 1];
      }
      if (area2 > 0) loops.push_back({std::move(corners), area2});  // outer boundaries only
    }
  }
  std::stable_sort(loops.begin(), loops.end(), [](const Loop& a, const Loop& b) { return a.area2 > b.area2; });
  if (loops.size() > max_polygons) loops.resize(max_polygons);
  std::vector<std::vector<int>> out;
  for (Loop& l : loops) out.push_back(std::move(l.pts));
  return out;
}

}  // namespace vitrt::server
