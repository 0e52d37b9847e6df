#include "io/npy.h"

#include <cstring>
#include <fstream>
#include <regex>

namespace vitrt {

namespace {
const char* descr(DType t) {
  switch (t) {
    case DType::F32: return "<f4";
    case DType::U8: return "|u1";
    case DType::I64: return "<i8";
    default: throw InvalidArgument(detail::concat("write_npy: unsupported dtype ", dtype_name(t)));
  }
}
}  // namespace

void write_npy(const std::string& path, const Tensor& t) {
  std::string shape = "(";
  for (int64_t d : t.shape()) shape += std::to_string(d) + ", ";
  if (t.dim() > 1) shape.resize(shape.size() - 2);
  shape += ")";
  std::string header = detail::concat("{'descr': '", descr(t.dtype()), "', 'fortran_order': False, 'shape': ", shape, ", }");
  // Magic (6) + version (2) + length (2) + header + '\n' padded to a multiple of 64.
  const size_t total = ((10 + header.size() + 1 + 63) / 64) * 64;
  header.append(total - 10 - header.size() - 1, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  VITRT_CHECK(out.good(), IoError, "cannot write '", path, "'");
  const uint16_t len = static_cast<uint16_t>(header.size());
  out.write("\x93NUMPY\x01\x00", 8);
  out.write(reinterpret_cast<const char*>(&len), 2);
  out.write(header.data(), header.size());
  out.write(static_cast<const char*>(t.raw()), static_cast<std::streamsize>(t.nbytes()));
  VITRT_CHECK(out.good(), IoError, "failed writing '", path, "'");
}

Tensor read_npy_f32(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  VITRT_CHECK(in.good(), IoError, "cannot open '", path, "'");
  char magic[8];
  uint16_t len = 0;
  in.read(magic, 8);
  in.read(reinterpret_cast<char*>(&len), 2);
  VITRT_CHECK(in.good() && std::memcmp(magic, "\x93NUMPY\x01", 7) == 0, InvalidArgument, "'", path,
              "' is not a version 1 .npy file");
  std::string header(len, '\0');
  in.read(header.data(), len);
  VITRT_CHECK(in.good(), InvalidArgument, "'", path, "' is truncated");
  std::smatch m;
  VITRT_CHECK(std::regex_search(header, m, std::regex("'descr':\\s*'([<|=]f[48])'")), InvalidArgument, "'", path,
              "' must hold little-endian float32 or float64 values, header: ", header);
  const bool f64 = m[1].str().back() == '8';
  VITRT_CHECK(header.find("'fortran_order': False") != std::string::npos, InvalidArgument, "'", path,
              "' is in Fortran order; save it C-contiguous");
  VITRT_CHECK(std::regex_search(header, m, std::regex("'shape':\\s*\\(([0-9,\\s]*)\\)")), InvalidArgument, "'",
              path, "' has no shape in its header");
  Shape shape;
  std::string dims = m[1].str();
  std::regex num("[0-9]+");
  // (the element count checked as it grows: a few dims under 10^9 each can overflow int64)
  int64_t numel = 1;
  bool overflow = false;
  for (auto it = std::sregex_iterator(dims.begin(), dims.end(), num); it != std::sregex_iterator(); ++it) {
    VITRT_CHECK(it->str().size() < 10, InvalidArgument, "'", path, "' has an implausible shape");
    shape.push_back(std::stoll(it->str()));
    overflow |= __builtin_mul_overflow(numel, shape.back(), &numel);
  }
  VITRT_CHECK(!overflow && numel <= (int64_t{1} << 28), InvalidArgument, "'", path, "' is too large (shape ",
              shape_str(shape), ")");
  Tensor t = Tensor::empty(shape, f64 ? DType::F64 : DType::F32);
  in.read(static_cast<char*>(t.raw()), static_cast<std::streamsize>(t.nbytes()));
  VITRT_CHECK(in.gcount() == static_cast<std::streamsize>(t.nbytes()), InvalidArgument, "'", path,
              "' is truncated: expected ", t.nbytes(), " data bytes");
  return t.to_f32();
}

}  // namespace vitrt
