// Embedding files: "VITRTEMB", u32 version, u32 header length, JSON header, float32 data.
// The header names the model that made the embedding so another model refuses it.
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "vitrt/sam.h"

namespace vitrt {

namespace {
constexpr char kMagic[8] = {'V', 'I', 'T', 'R', 'T', 'E', 'M', 'B'};
constexpr uint32_t kVersion = 1;
constexpr uint32_t kMaxHeader = 1 << 16;
}  // namespace

void save_embedding(const ImageEmbedding& e, const std::string& path) {
  VITRT_CHECK(e.features.defined() && e.features.dtype() == DType::F32 && e.features.dim() == 4, InvalidArgument,
              "save_embedding: no embedding to save");
  nlohmann::json h = {{"model", e.model_fingerprint},
                      {"shape", e.features.shape()},
                      {"original_size", {e.original_height, e.original_width}},
                      {"input_size", {e.input_height, e.input_width}}};
  const std::string header = h.dump();
  std::ofstream out(path, std::ios::binary);
  VITRT_CHECK(out.good(), IoError, "cannot write embedding file '", path, "'");
  const uint32_t len = static_cast<uint32_t>(header.size());
  out.write(kMagic, 8);
  out.write(reinterpret_cast<const char*>(&kVersion), 4);
  out.write(reinterpret_cast<const char*>(&len), 4);
  out.write(header.data(), header.size());
  out.write(static_cast<const char*>(e.features.raw()), static_cast<std::streamsize>(e.features.nbytes()));
  VITRT_CHECK(out.good(), IoError, "failed writing embedding file '", path, "'");
}

ImageEmbedding load_embedding(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  VITRT_CHECK(in.good(), IoError, "cannot open embedding file '", path, "'");
  char magic[8] = {};
  uint32_t version = 0, len = 0;
  in.read(magic, 8);
  in.read(reinterpret_cast<char*>(&version), 4);
  in.read(reinterpret_cast<char*>(&len), 4);
  VITRT_CHECK(in.good() && std::memcmp(magic, kMagic, 8) == 0, InvalidArgument, "'", path,
              "' is not a vitrt embedding file");
  VITRT_CHECK(version == kVersion, InvalidArgument, "embedding file '", path, "' has version ", version,
              ", this build reads version ", kVersion);
  VITRT_CHECK(len > 0 && len <= kMaxHeader, InvalidArgument, "embedding file '", path, "' has a corrupt header");
  std::string header(len, '\0');
  in.read(header.data(), len);
  VITRT_CHECK(in.good(), InvalidArgument, "embedding file '", path, "' is truncated");
  ImageEmbedding e;
  Shape shape;
  try {
    auto h = nlohmann::json::parse(header);
    e.model_fingerprint = h.at("model").get<std::string>();
    shape = h.at("shape").get<Shape>();
    e.original_height = h.at("original_size").at(0).get<int>();
    e.original_width = h.at("original_size").at(1).get<int>();
    e.input_height = h.at("input_size").at(0).get<int>();
    e.input_width = h.at("input_size").at(1).get<int>();
  } catch (const nlohmann::json::exception& ex) {
    throw InvalidArgument(detail::concat("embedding file '", path, "' has a corrupt header: ", ex.what()));
  }
  VITRT_CHECK(shape.size() == 4 && shape[0] == 1 && shape[1] > 0 && shape[1] <= 4096 && shape[2] > 0 &&
                  shape[2] <= 1024 && shape[3] > 0 && shape[3] <= 1024,
              InvalidArgument, "embedding file '", path, "' has an implausible shape ", shape_str(shape));
  e.features = Tensor::empty(shape);
  in.read(static_cast<char*>(e.features.raw()), static_cast<std::streamsize>(e.features.nbytes()));
  VITRT_CHECK(in.gcount() == static_cast<std::streamsize>(e.features.nbytes()), InvalidArgument, "embedding file '",
              path, "' is truncated: expected ", e.features.nbytes(), " bytes of features");
  in.peek();
  VITRT_CHECK(in.eof(), InvalidArgument, "embedding file '", path, "' has trailing bytes");
  return e;
}

}  // namespace vitrt
