// Loading valid checkpoints: torch.save archives (several pickle protocols and zip layouts),
// safetensors, wrapped state_dicts and Hugging Face SAM names. Expected values come from
// scripts/make_checkpoint_fixtures.py (expected.json).
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "models/sam/sam_hf_keys.h"
#include "vitrt/checkpoint.h"

namespace vitrt {
namespace {

using nlohmann::json;

std::string fixture(const std::string& name) { return std::string(VITRT_FIXTURES) + "/checkpoint/" + name; }

const json& expected() {
  static const json j = [] {
    std::ifstream in(fixture("expected.json"));
    return json::parse(in);
  }();
  return j;
}

double value_at(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::F32: return t.data<float>()[i];
    case DType::F64: return t.data<double>()[i];
    case DType::F16: return f16_to_f32(t.data<uint16_t>()[i]);
    case DType::BF16: return bf16_to_f32(t.data<uint16_t>()[i]);
    case DType::I64: return static_cast<double>(t.data<int64_t>()[i]);
    case DType::I32: return t.data<int32_t>()[i];
    case DType::I16: return t.data<int16_t>()[i];
    case DType::I8: return t.data<int8_t>()[i];
    case DType::U8: return t.data<uint8_t>()[i];
    case DType::Bool: return static_cast<const uint8_t*>(t.raw())[i];
  }
  return NAN;
}

// Whether `p` lies in a mapping of the file `path` (so the tensor was used in place, not copied);
// with p == nullptr, whether the file is mapped at all.
bool mapped_from(const void* p, const std::string& path) {
  const std::string canonical = std::filesystem::canonical(path).string();
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    if (line.size() < canonical.size() || line.compare(line.size() - canonical.size(), canonical.size(), canonical))
      continue;
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream(line) >> std::hex >> lo >> dash >> hi;
    auto a = reinterpret_cast<uintptr_t>(p);
    if (!p || (a >= lo && a < hi)) return true;
  }
  return false;
}

// Every tensor in `want` (an expected.json section) matches `sd` exactly, and nothing else is there.
void expect_matches(const StateDict& sd, const json& want, const std::string& file) {
  SCOPED_TRACE(file);
  std::set<std::string> names;
  for (const auto& [name, t] : sd) names.insert(name);
  std::set<std::string> want_names;
  for (const auto& [name, w] : want.items()) want_names.insert(name);
  EXPECT_EQ(names, want_names);
  for (const auto& [name, w] : want.items()) {
    SCOPED_TRACE(name);
    auto it = sd.find(name);
    if (it == sd.end()) continue;
    const Tensor& t = it->second;
    EXPECT_EQ(dtype_name(t.dtype()), w["dtype"].get<std::string>());
    EXPECT_EQ(t.shape(), w["shape"].get<Shape>());
    const auto values = w["values"].get<std::vector<double>>();
    ASSERT_EQ(t.numel(), static_cast<int64_t>(values.size()));
    double sum = 0;
    for (int64_t i = 0; i < t.numel(); ++i) {
      EXPECT_EQ(value_at(t, i), values[i]) << "element " << i;
      sum += value_at(t, i);
    }
    EXPECT_NEAR(sum, w["sum"].get<double>(), 1e-9 * (1 + std::abs(sum)));
  }
}

class TensorFiles : public testing::TestWithParam<const char*> {};

TEST_P(TensorFiles, NamesDtypesShapesAndValuesMatchTorch) {
  const std::string path = fixture(GetParam());
  expect_matches(load_state_dict(path), expected()["tensors"], path);
  // The format-specific entry point agrees with the sniffing one.
  StateDict direct = std::string(GetParam()).ends_with(".safetensors") ? load_safetensors(path)
                                                                       : load_torch_checkpoint(path);
  expect_matches(direct, expected()["tensors"], path);
}

INSTANTIATE_TEST_SUITE_P(Checkpoint, TensorFiles,
                         testing::Values("tensors.pth", "tensors_p4.pth", "tensors_zip64.pth",
                                         "tensors_misaligned.pth", "tensors.safetensors"),
                         [](const testing::TestParamInfo<const char*>& info) {
                           std::string name = info.param;
                           for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return name;
                         });

TEST(Checkpoint, AlignedContiguousStoragesAreUsedInPlace) {
  const std::string path = fixture("tensors.pth");
  StateDict sd = load_torch_checkpoint(path);
  for (const char* name : {"f32", "f16", "bf16", "i64", "shared_head", "shared_tail", "param"})
    EXPECT_TRUE(mapped_from(sd.at(name).raw(), path)) << name;
  // Views that are not contiguous are materialised in fresh memory.
  for (const char* name : {"transposed", "strided_slice"}) EXPECT_FALSE(mapped_from(sd.at(name).raw(), path)) << name;
  // The two views of one storage point into the same bytes, 8 floats apart.
  EXPECT_EQ(sd.at("shared_tail").data<float>(), sd.at("shared_head").data<float>() + 8);

  const std::string st = fixture("tensors.safetensors");
  StateDict s = load_safetensors(st);
  EXPECT_TRUE(mapped_from(s.at("f32").raw(), st));
}

TEST(Checkpoint, MisalignedStoragesAreCopied) {
  const std::string path = fixture("tensors_misaligned.pth");
  StateDict sd = load_torch_checkpoint(path);
  EXPECT_FALSE(mapped_from(sd.at("f32").raw(), path));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(sd.at("f32").raw()) % alignof(float), 0u);

  const std::string st = fixture("unaligned.safetensors");
  StateDict u = load_safetensors(st);
  expect_matches(u, expected()["unaligned"], st);
  EXPECT_FALSE(mapped_from(u.at("x").raw(), st));
  EXPECT_TRUE(mapped_from(u.at("pad").raw(), st));  // bytes need no alignment
}

TEST(Checkpoint, TensorsKeepTheMappingAlive) {
  const std::string path = fixture("tensors.pth");
  Tensor f32;
  {
    StateDict sd = load_torch_checkpoint(path);
    f32 = sd.at("f32");
  }
  ASSERT_TRUE(mapped_from(f32.raw(), path));
  EXPECT_EQ(value_at(f32, 5), expected()["tensors"]["f32"]["values"][5].get<double>());
  f32 = Tensor();
  // The last tensor is gone, and with it the mapping.
  EXPECT_FALSE(mapped_from(nullptr, path));
}

TEST(Checkpoint, WrappedStateDictsAreUnwrapped) {
  for (const char* name : {"wrapped_model.pth", "wrapped_state_dict.pth"})
    expect_matches(load_state_dict(fixture(name)), expected()["wrapped"], name);
  expect_matches(load_state_dict(fixture("handmade.pth")), expected()["handmade"], "handmade.pth");
}

// The transformers-named twin maps back to exactly the official tensors.
TEST(SamHfKeys, HuggingFaceNamesMapToOfficialOnes) {
  StateDict official = load_state_dict(fixture("sam_tiny_official.pth"));
  StateDict hf = load_state_dict(fixture("sam_tiny_hf.safetensors"));
  const json& want = expected()["sam_tiny"];
  ASSERT_EQ(official.size(), want["num_official_keys"].get<size_t>());
  ASSERT_EQ(hf.size(), want["hf_keys"].size());
  EXPECT_TRUE(is_hf_sam_state_dict(hf));
  EXPECT_FALSE(is_hf_sam_state_dict(official));

  auto expect_same = [&](const StateDict& mapped) {
    std::set<std::string> a, b;
    for (const auto& [k, t] : mapped) a.insert(k);
    for (const auto& [k, t] : official) b.insert(k);
    ASSERT_EQ(a, b);
    double sum = 0;
    for (const auto& [name, t] : official) {
      const Tensor& m = mapped.at(name);
      ASSERT_EQ(m.shape(), t.shape()) << name;
      ASSERT_EQ(m.dtype(), t.dtype()) << name;
      EXPECT_EQ(std::memcmp(m.raw(), t.raw(), t.nbytes()), 0) << name;
      for (int64_t i = 0; i < t.numel(); ++i) sum += t.data<float>()[i];
    }
    EXPECT_NEAR(sum, want["sum"].get<double>(), 1e-6 * (1 + std::abs(sum)));
  };
  expect_same(sam_state_dict_from_hf(hf));  // as save_pretrained writes it: only the shared copy

  // Older exports carry the tied positional matrix under both names, or only the prompt one.
  StateDict both = hf;
  both["prompt_encoder.shared_embedding.positional_embedding"] = hf.at("shared_image_embedding.positional_embedding");
  expect_same(sam_state_dict_from_hf(both));
  StateDict prompt_only = both;
  prompt_only.erase("shared_image_embedding.positional_embedding");
  expect_same(sam_state_dict_from_hf(prompt_only));
}

TEST(SamHfKeys, UnknownKeysAreRefused) {
  StateDict hf = load_state_dict(fixture("sam_tiny_hf.safetensors"));
  hf["vision_encoder.layers.0.attn.mystery.weight"] = Tensor::zeros({1});
  try {
    sam_state_dict_from_hf(hf);
    FAIL() << "expected CheckpointError";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("vision_encoder.layers.0.attn.mystery.weight"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace vitrt
