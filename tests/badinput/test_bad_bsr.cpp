// Bad block-sparse input: model files whose BSR parts are out of range, unsorted, mis-sized or
// missing, unsupported block sizes, shapes the block does not divide, sparsity outside [0, 1).
// Each must fail with a clear error naming what is wrong -- never crash or read out of bounds.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <vector>

#include "error_test_util.h"
#include "io/vitrt_model_file.h"
#include "vitrt/bsr.h"

namespace vitrt {
namespace {

using test::expect_error;

using nlohmann::json;


// A raw safetensors writer, so the tests can store what write_model_file would refuse to write.
struct RawTensor {
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};
template <class T>
RawTensor raw(const char* dtype, std::vector<int64_t> shape, const std::vector<T>& v) {
  RawTensor t{dtype, std::move(shape), std::vector<uint8_t>(v.size() * sizeof(T))};
  if (!v.empty()) std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}

std::string write_raw(const std::string& file, const std::map<std::string, RawTensor>& tensors, const json& meta) {
  json header = json::object();
  header["__metadata__"] = meta;
  uint64_t off = 0;
  for (const auto& [name, t] : tensors) {
    header[name] = json{{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {off, off + t.bytes.size()}}};
    off += t.bytes.size();
  }
  const std::string text = header.dump();
  const std::string path = std::string(VITRT_TEST_TMP) + "/" + file;
  std::ofstream out(path, std::ios::binary);
  const uint64_t n = text.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << text;
  for (const auto& [name, t] : tensors) out.write(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size());
  return path;
}

// A valid 32 x 48 weight, block 16: block-rows {0: cols 0, 2}, {1: col 1}.
struct Parts {
  std::vector<int32_t> row_ptr = {0, 2, 3};
  std::vector<int32_t> col_idx = {0, 2, 1};
  int64_t nnz_values = 3, block = 16, rows = 32, cols = 48;
  std::string meta;  // empty: the matching {"rows","cols","block"}
};

std::string write_parts(const std::string& file, const Parts& p) {
  std::map<std::string, RawTensor> t;
  t["fc.weight.bsr_values"] =
      raw("F32", {p.nnz_values, p.block, p.block}, std::vector<float>(p.nnz_values * p.block * p.block, 0.5f));
  t["fc.weight.bsr_col_idx"] = raw("I32", {static_cast<int64_t>(p.col_idx.size())}, p.col_idx);
  t["fc.weight.bsr_row_ptr"] = raw("I32", {static_cast<int64_t>(p.row_ptr.size())}, p.row_ptr);
  t["fc.bias"] = raw("F32", {32}, std::vector<float>(32, 0.f));
  const std::string meta =
      p.meta.empty() ? json{{"rows", p.rows}, {"cols", p.cols}, {"block", p.block}}.dump() : p.meta;
  return write_raw(file, t, json{{"fc.weight.bsr", meta}});
}

void expect_bad_file(const std::string& file, const Parts& p, std::initializer_list<const char*> words) {
  SCOPED_TRACE(file);
  const std::string path = write_parts(file, p);
  expect_error<CheckpointError>([&] { io::load_model_file(path); }, words);
}

TEST(BadBsrFile, ValidBaselineLoads) {
  const io::ModelFile f = io::load_model_file(write_parts("bsr_ok.vitrt", Parts{}));
  ASSERT_EQ(f.sparse.count("fc.weight"), 1u);
  EXPECT_EQ(f.sparse.at("fc.weight").nnz_blocks(), 3);
  EXPECT_EQ(f.dense.count("fc.bias"), 1u);
}

TEST(BadBsrFile, ColumnIndexOutOfRange) {
  Parts p;
  p.col_idx = {0, 3, 1};  // only 3 block-columns
  expect_bad_file("bsr_col_range.vitrt", p, {"fc.weight", "col_idx[1] = 3", "out of range"});
  p.col_idx = {0, 2, -1};
  expect_bad_file("bsr_col_negative.vitrt", p, {"fc.weight", "out of range"});
}

TEST(BadBsrFile, ColumnIndicesNotSorted) {
  Parts p;
  p.col_idx = {2, 0, 1};
  expect_bad_file("bsr_unsorted.vitrt", p, {"fc.weight", "not strictly increasing"});
  p.col_idx = {2, 2, 1};  // duplicate
  expect_bad_file("bsr_duplicate.vitrt", p, {"fc.weight", "not strictly increasing"});
}

TEST(BadBsrFile, RowPointerBroken) {
  Parts p;
  p.row_ptr = {0, 3, 2};
  expect_bad_file("bsr_rowptr_decreasing.vitrt", p, {"fc.weight", "row_ptr", "non-decreasing"});
  p.row_ptr = {1, 2, 3};
  expect_bad_file("bsr_rowptr_start.vitrt", p, {"fc.weight", "row_ptr[0]"});
  p.row_ptr = {0, 2, 2};
  expect_bad_file("bsr_rowptr_end.vitrt", p, {"fc.weight", "row_ptr ends at 2"});
  p.row_ptr = {0, 2, 3, 3};
  expect_bad_file("bsr_rowptr_length.vitrt", p, {"fc.weight", "row_ptr has shape [4]"});
  p.row_ptr = {0, 2, 1000000};
  expect_bad_file("bsr_rowptr_huge.vitrt", p, {"fc.weight", "row_ptr"});
}

TEST(BadBsrFile, WrongSizes) {
  Parts p;
  p.nnz_values = 2;
  expect_bad_file("bsr_values_short.vitrt", p, {"fc.weight", "values"});
  Parts q;
  q.meta = R"({"rows": 32, "cols": 40, "block": 16})";
  expect_bad_file("bsr_block_not_dividing.vitrt", q, {"fc.weight", "not a positive multiple of the block size 16"});
  q.meta = R"({"rows": 32, "cols": 48, "block": 48})";
  expect_bad_file("bsr_block_unsupported.vitrt", q, {"fc.weight", "block size 48 is not supported"});
  q.meta = R"({"rows": 32, "cols": 48})";
  expect_bad_file("bsr_meta_incomplete.vitrt", q, {"fc.weight", "metadata must be"});
  q.meta = "not json";
  expect_bad_file("bsr_meta_not_json.vitrt", q, {"fc.weight", "metadata must be"});
}

TEST(BadBsrFile, MissingOrOrphanParts) {
  std::map<std::string, RawTensor> t;
  t["fc.weight.bsr_values"] = raw("F32", {1, 16, 16}, std::vector<float>(256, 1.f));
  t["fc.weight.bsr_col_idx"] = raw("I32", {1}, std::vector<int32_t>{0});
  const json meta{{"fc.weight.bsr", R"({"rows": 16, "cols": 16, "block": 16})"}};
  const std::string missing = write_raw("bsr_missing.vitrt", t, meta);
  expect_error<CheckpointError>([&] { io::load_model_file(missing); }, {"fc.weight.bsr_row_ptr", "missing"});
  t["fc.weight.bsr_row_ptr"] = raw("I32", {2}, std::vector<int32_t>{0, 1});
  const std::string orphan = write_raw("bsr_orphan.vitrt", t, json::object());
  expect_error<CheckpointError>([&] { io::load_model_file(orphan); }, {"fc.weight.bsr_", "no matching"});
  t["fc.weight.bsr_col_idx"] = raw("I64", {1}, std::vector<int64_t>{0});
  const std::string wide = write_raw("bsr_i64.vitrt", t, meta);
  expect_error<CheckpointError>([&] { io::load_model_file(wide); }, {"fc.weight", "int32"});
}

TEST(BadBsrApi, BlockSizeAndShape) {
  const Tensor w = Tensor::zeros({96, 64});
  expect_error<InvalidArgument>([&] { bsr_from_dense(w, 48); }, {"block size 48", "16, 32 or 64"});
  expect_error<InvalidArgument>([&] { bsr_from_dense(w, 64); }, {"[96, 64]", "not a multiple of the block size 64"});
  expect_error<InvalidArgument>([&] { prune_blocks_by_magnitude(w, 64, 0.5); }, {"not a multiple"});
  expect_error<InvalidArgument>([&] { bsr_from_dense(Tensor::zeros({64}), 16); }, {"2-D"});
  const Tensor bad_mask = Tensor::zeros({3, 3}, DType::U8);
  expect_error<InvalidArgument>([&] { bsr_from_dense(w, 32, &bad_mask); }, {"mask", "[3, 2]"});
}

TEST(BadBsrApi, SparsityOutsideUnitInterval) {
  const Tensor w = Tensor::zeros({64, 64});
  for (double s : {1.0, 1.5, -0.1, std::nan("")})
    expect_error<InvalidArgument>([&] { prune_blocks_by_magnitude(w, 16, s); }, {"sparsity", "[0, 1)"});
}

TEST(BadBsrApi, WriterRefusesInvalidMatrix) {
  BsrMatrix m = bsr_from_dense(Tensor::from_vector(std::vector<float>(256, 1.f), {16, 16}), 16);
  m.col_idx.data<int32_t>()[0] = 5;
  expect_error<InvalidArgument>(
      [&] { io::write_model_file(std::string(VITRT_TEST_TMP) + "/never.vitrt", {}, {{"w", m}}); },
      {"'w'", "out of range"});
}

// The CLI refuses bad options before touching the checkpoint.
TEST(BadBsrCli, SparsifyOptions) {
  if (!std::filesystem::exists(VITRT_CLI)) GTEST_SKIP() << "vitrt CLI not built: " << VITRT_CLI;
  auto run = [](const std::string& args) {
    const std::string cmd =
        std::string(VITRT_CLI) + " sparsify --checkpoint /nonexistent.pth --out /tmp/x " + args + " 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    std::string out;
    char buf[512];
    while (fgets(buf, sizeof buf, p)) out += buf;
    const int status = pclose(p);
    return std::make_pair(status, out);
  };
  for (auto [args, word] : {std::pair<const char*, const char*>{"--sparsity 1.0", "[0, 1)"},
                            {"--sparsity -0.5", "[0, 1)"},
                            {"--block 48", "16, 32 or 64"},
                            {"--layers attn", "not supported"}}) {
    auto [status, out] = run(args);
    EXPECT_NE(status, 0) << args;
    EXPECT_NE(out.find(word), std::string::npos) << args << ": " << out;
  }
}

}  // namespace
}  // namespace vitrt
