// The kernels' A/B switches (VITRT_ATTN_WGMMA, VITRT_BSR_STREAM, ...): an environment variable
// mapped to an enum. Host code.
#pragma once
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <utility>

namespace vitrt::cuda {

// Environment variable `var` mapped through `names` (exact matches), else `fallback` (unset or
// unknown). Callers read it once per process.
template <class E>
E env_choice(const char* var, std::initializer_list<std::pair<const char*, E>> names, E fallback) {
  const char* e = std::getenv(var);
  if (e != nullptr)
    for (const auto& [name, value] : names)
      if (std::strcmp(e, name) == 0) return value;
  return fallback;
}

// The usual three-way switch of a kernel: "0" never, "1" wherever supported, anything else (or
// unset) the measured default.
enum class KernelMode { Off, On, Auto };
inline KernelMode kernel_mode_from_env(const char* var) {
  return env_choice<KernelMode>(var, {{"0", KernelMode::Off}, {"1", KernelMode::On}}, KernelMode::Auto);
}

// Environment variable `var` as a decimal integer (a size or count switch); 0 when unset or not a
// number. Callers read it once per process.
inline int int_from_env(const char* var) {
  const char* e = std::getenv(var);
  return e != nullptr ? std::atoi(e) : 0;
}

}  // namespace vitrt::cuda
