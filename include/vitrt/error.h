// Error types thrown by vitrt. Every failure a user can cause (bad checkpoint, bad image,
// bad prompt, wrong shapes) surfaces as one of these with a message that says what and where.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace vitrt {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
// A checkpoint or model file that cannot be read or does not match the model.
class CheckpointError : public Error {
 public:
  using Error::Error;
};
// An image that cannot be decoded, is empty or too large.
class ImageError : public Error {
 public:
  using Error::Error;
};
// A bad argument from the caller: prompt out of range, wrong tensor shape, bad option.
class InvalidArgument : public Error {
 public:
  using Error::Error;
};
// A file that cannot be opened, read or written.
class IoError : public Error {
 public:
  using Error::Error;
};

namespace detail {
template <class... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

}  // namespace vitrt

// VITRT_CHECK(cond, ExceptionType, message parts...): throw ExceptionType(concat(parts)) if !cond.
#define VITRT_CHECK(cond, Exc, ...)                         \
  do {                                                      \
    if (!(cond)) throw Exc(::vitrt::detail::concat(__VA_ARGS__)); \
  } while (0)
