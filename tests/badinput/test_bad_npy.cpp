// .npy files as the CLI reads them (low-res logits fed back as a mask prompt): every malformed header
// or body is an InvalidArgument naming the file, never a crash or a wrong-sized tensor.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "io/npy.h"
#include "vitrt/tensor.h"

namespace vitrt {
namespace {

std::string npy_file(const std::string& name, const std::string& header_dict, const std::string& body) {
  std::string header = header_dict;
  while ((10 + header.size() + 1) % 64) header += ' ';
  header += '\n';
  const std::string path = std::string(VITRT_TEST_TMP) + "/" + name;
  std::ofstream f(path, std::ios::binary);
  f << "\x93NUMPY" << '\x01' << '\x00' << static_cast<char>(header.size() & 0xff)
    << static_cast<char>(header.size() >> 8) << header << body;
  return path;
}

void expect_npy_error(const std::string& path, const std::string& needle) {
  try {
    read_npy_f32(path);
    FAIL() << path << ": no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(BadNpy, ValidFileReads) {
  const std::string body(4 * 6, '\0');
  const Tensor t = read_npy_f32(npy_file("ok.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", body));
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
}

// Dimensions under 10^9 each whose product overflows int64 (found by fuzz_npy): refused as too
// large, not allocated at a wrapped size.
TEST(BadNpy, ShapeWhoseProductOverflows) {
  expect_npy_error(npy_file("overflow.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (888880000, 888880000, 88888, 16), }", ""),
                   "too large");
  expect_npy_error(npy_file("big.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (70000, 70000), }", ""),
                   "too large");
}

TEST(BadNpy, TruncatedBodyAndWrongLayout) {
  expect_npy_error(npy_file("short.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 4), }", "abc"),
                   "truncated");
  expect_npy_error(npy_file("fortran.npy", "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }",
                            std::string(16, '\0')),
                   "Fortran");
}

TEST(BadTensorShape, ByteCountOverflowIsRefusedBeforeAllocating) {
  EXPECT_THROW(Tensor::empty({int64_t{1} << 40, int64_t{1} << 30}), InvalidArgument);
  EXPECT_THROW(Tensor::empty({3, -1}), InvalidArgument);
}

}  // namespace
}  // namespace vitrt
