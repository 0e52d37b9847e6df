// rounded(v): v, with the compiler kept from contracting the product that produced it into a
// following add. GCC forms FMAs across statements at -O2 on FMA targets (the CPU build is
// -march=x86-64-v3), which rounds once where the reference (PyTorch, numpy, Pillow) rounds twice;
// code that must reproduce the reference's floating-point results bit for bit wraps such products.
#pragma once

namespace vitrt {

template <class T>
inline T rounded(T v) {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  asm("" : "+x"(v));
#else
  volatile T t = v;
  v = t;
#endif
  return v;
}

}  // namespace vitrt
