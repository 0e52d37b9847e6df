// Seeded random tensors for the random-weight models (SAM, ViT) that benchmarks and tests build
// without a checkpoint: each named tensor drawn from N(mean, std) in the order it is added, so a
// (config, seed) pair always gives the same state dict.
#pragma once
#include <cmath>
#include <random>
#include <string>

#include "vitrt/checkpoint.h"

namespace vitrt::models {

struct RandomWeights {
  std::mt19937_64 rng;
  StateDict sd;

  explicit RandomWeights(uint64_t seed) : rng(seed) {}

  void normal(const std::string& key, Shape shape, float mean, float std) {
    Tensor t = Tensor::empty(std::move(shape));
    std::normal_distribution<float> d(mean, std);
    float* p = t.data<float>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = d(rng);
    sd[key] = t;
  }
  // nn.Linear: weight [out, in] with std 1/sqrt(in), bias [out].
  void linear(const std::string& p, int64_t out, int64_t in, bool bias = true) {
    normal(p + ".weight", {out, in}, 0.f, 1.f / std::sqrt(static_cast<float>(in)));
    if (bias) normal(p + ".bias", {out}, 0.f, 0.02f);
  }
  // LayerNorm: weight around 1, bias around 0 (both perturbed, so tests see their effect).
  void norm(const std::string& p, int64_t d) {
    normal(p + ".weight", {d}, 1.f, 0.1f);
    normal(p + ".bias", {d}, 0.f, 0.1f);
  }
  // nn.Conv2d with a square kernel: weight [out, in, k, k] with std 1/sqrt(in k^2), bias [out].
  void conv(const std::string& p, int64_t out, int64_t in, int64_t k, bool bias = true) {
    normal(p + ".weight", {out, in, k, k}, 0.f, 1.f / std::sqrt(static_cast<float>(in * k * k)));
    if (bias) normal(p + ".bias", {out}, 0.f, 0.02f);
  }
};

}  // namespace vitrt::models
