// SuperBlock's Supermask folded into the weights (vitrt/supermask.h) and `vitrt sparsify
// --supermask`: the percentile rule on hand-made scores (Python's half-to-even round, ties, NaN,
// the 9e9 clamp), tile-size inference, and against SuperBlock's own code (tests/fixtures/supermask,
// scripts/make_supermask_fixtures.py): folded weights bit for bit, a training checkpoint's
// argparse "args" read without running anything, and the packed sparse ViT's logits against the
// trained model's.
#include <gtest/gtest.h>

#include "cli_test_util.h"
#include "error_test_util.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "io/vitrt_model_file.h"
#include "vitrt/bsr.h"
#include "vitrt/checkpoint.h"
#include "vitrt/supermask.h"
#include "vitrt/vit.h"

namespace vitrt {
namespace {

using test::expect_error;

const std::string kDir = std::string(VITRT_FIXTURES) + "/supermask";
const std::string kTmp = VITRT_TEST_TMP;
constexpr int kHeads = 2;  // the fixtures' ViT: hidden 64 in 2 heads (the tensors do not tell)

std::vector<uint8_t> mask_of(const std::vector<float>& scores, double sparsity) {
  Tensor m = supermask_tile_mask(Tensor::from_vector(scores, {static_cast<int64_t>(scores.size())}), sparsity);
  return {m.data<uint8_t>(), m.data<uint8_t>() + m.numel()};
}

TEST(Supermask, TileMaskFollowsSuperBlocksPercentile) {
  // 10 scores at 0.5: k = 1 + round(0.01 * 50 * 9) = 1 + round(4.5) = 5 (half to even, not 6):
  // the 5th smallest and everything above it survive, 6 of 10.
  const std::vector<float> ten = {0.9f, 0.1f, 0.8f, 0.2f, 0.7f, 0.3f, 0.6f, 0.4f, 0.5f, 0.0f};
  EXPECT_EQ(mask_of(ten, 0.5), (std::vector<uint8_t>{1, 0, 1, 0, 1, 0, 1, 1, 1, 0}));
  // Ties at the threshold all survive: nothing is pruned from four equal scores.
  EXPECT_EQ(mask_of({1, 1, 1, 1}, 0.5), (std::vector<uint8_t>{1, 1, 1, 1}));
  // NaN sorts last (torch.kthvalue) and is never below the threshold: kept.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(mask_of({nan, 1, 2, 3}, 0.5), (std::vector<uint8_t>{1, 0, 0, 1}));
  // scores.clamp_(max=9e9): inf and 1e10 both become 9e9, the 4th smallest, so both survive
  // (unclamped, the threshold would be inf and 1e10 would go).
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(mask_of({inf, 1e10f, 1, 2}, 0.9), (std::vector<uint8_t>{1, 1, 0, 0}));
  // Sparsity 0: k = 1, everything survives.
  EXPECT_EQ(mask_of({3, 1, 2}, 0.0), (std::vector<uint8_t>{1, 1, 1}));
  expect_error<InvalidArgument>([] { mask_of({1, 2}, 1.0); }, {"[0, 1)"});
}

TEST(Supermask, LayerSparsityIsCappedAtOneTileKept) {
  EXPECT_DOUBLE_EQ(supermask_layer_sparsity(0.8, 4), 0.75);
  EXPECT_DOUBLE_EQ(supermask_layer_sparsity(0.5, 4), 0.5);
  EXPECT_DOUBLE_EQ(supermask_layer_sparsity(0.9, 1), 0.0);
}

TEST(Supermask, FoldExpandsTilesAndCutsTheEdge) {
  // 3 x 5 weight in tiles of 2: the mask is 2 x 3, its last row and column cover one element.
  std::vector<float> w(15);
  for (int i = 0; i < 15; ++i) w[i] = static_cast<float>(i + 1);
  Tensor mask = Tensor::empty({2, 3}, DType::U8);
  const uint8_t bits[6] = {1, 0, 1, 0, 1, 1};
  std::memcpy(mask.data<uint8_t>(), bits, 6);
  Tensor f = supermask_fold(Tensor::from_vector(w, {3, 5}), mask, 2);
  const std::vector<float> want = {1, 2, 0, 0, 5, 6, 7, 0, 0, 10, 0, 0, 13, 14, 15};
  EXPECT_EQ(std::vector<float>(f.data<float>(), f.data<float>() + 15), want);
  // The transform, then the mask: (w * 2 + 1) * mask.
  Tensor g = supermask_fold(Tensor::from_vector(w, {3, 5}), mask, 2, 2.0f, 1.0f);
  EXPECT_EQ(g.data<float>()[0], 3.0f);
  EXPECT_EQ(g.data<float>()[2], 0.0f);
  EXPECT_EQ(g.data<float>()[14], 31.0f);
  expect_error<CheckpointError>([&] { supermask_fold(Tensor::from_vector(w, {3, 5}), mask, 4); }, {"do not tile"});
}

TEST(Supermask, TileSizeIsInferredFromEveryLayerTogether) {
  auto t = [](Shape s) { return Tensor::zeros(std::move(s)); };
  // A 10 x 62 head with 1 x 4 scores fits tiles 16 to 20, which cut its columns differently, and
  // none divides 62.
  StateDict sd = {{"heads.head.weight", t({10, 62})}, {"heads.head.scores", t({1, 4})}};
  expect_error<CheckpointError>([&] { infer_supermask_tile(sd); }, {"16 to 20", "give the tile size"});
  // 10 x 64 fits 16 to 21: 16 divides 64.
  EXPECT_EQ(infer_supermask_tile({{"h.weight", t({10, 64})}, {"h.scores", t({1, 4})}}), 16);
  // Another layer narrows the range: 200 x 62 with 13 x 4 scores fits 16 only (ceil(200 / 17) = 12).
  sd["mlp.0.weight"] = t({200, 62});
  sd["mlp.0.scores"] = t({13, 4});
  EXPECT_EQ(infer_supermask_tile(sd), 16);
  sd["mlp.3.weight"] = t({64, 128});
  sd["mlp.3.scores"] = t({2, 4});  // tile 32 here: no single size fits
  expect_error<CheckpointError>([&] { infer_supermask_tile(sd); }, {"no single tile size"});
  expect_error<CheckpointError>([&] { infer_supermask_tile({{"w.weight", t({4, 4})}}); }, {"no Supermask layers"});
  // Hostile shapes: scores with an empty dim; a dim of 2^40 with an empty other dim (no data to
  // hold) answered at once.
  expect_error<CheckpointError>([&] { infer_supermask_tile({{"e.weight", t({8, 8})}, {"e.scores", t({0, 2})}}); },
                                {"at least one per dim"});
  expect_error<CheckpointError>([&] { fold_supermasks({{"e.weight", t({8, 8})}, {"e.scores", t({2, 0})}}, 0.5, 4); },
                                {"at least one per dim"});
  expect_error<CheckpointError>([&] { infer_supermask_tile({{"z.weight", t({int64_t{1} << 40, 0})}, {"z.scores", t({3, 1})}}); },
                                {"give the tile size"});

  // One element of scores per layer: any tile covers it, the same mask either way.
  EXPECT_EQ(infer_supermask_tile({{"a.weight", t({8, 8})}, {"a.scores", t({1, 1})}}), 8);
}

// ---- against SuperBlock's own code ----

nlohmann::json golden() {
  std::ifstream in(kDir + "/golden.json");
  EXPECT_TRUE(in.good());
  return nlohmann::json::parse(in);
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

// fold_supermasks on a fixture (its "model" or "model_ema" weights) against the weights SuperBlock's
// forward multiplies by (<fixture>.folded.pth), bit for bit; unmasked weights stay as stored.
void expect_fold_matches(const std::string& fixture, double sparsity, const std::string& entry, const std::string& prefix) {
  SCOPED_TRACE(fixture + " " + entry);
  TorchCheckpoint ck = load_torch_checkpoint_with_settings(kDir + "/" + fixture + ".pth", entry);
  StateDict sd;
  for (auto& [k, v] : ck.state_dict)
    sd[entry == "model_ema" ? (k.rfind("module.", 0) == 0 ? k.substr(7) : k) : k] = v;
  sd.erase("n_averaged");
  std::vector<SupermaskLayer> report;
  const StateDict folded = fold_supermasks(sd, sparsity, 0, &report);
  const StateDict want = load_torch_checkpoint(kDir + "/" + fixture + ".folded.pth");
  int compared = 0;
  for (const auto& [key, t] : want) {
    if (key.rfind(prefix, 0) != 0 || (prefix.empty() && key.rfind("ema.", 0) == 0)) continue;
    const std::string name = key.substr(prefix.size());
    ASSERT_TRUE(folded.count(name)) << name;
    EXPECT_TRUE(same_bits(folded.at(name), t)) << name << " differs from SuperBlock's";
    ++compared;
  }
  EXPECT_GE(compared, 4);
  for (const SupermaskLayer& l : report) {
    EXPECT_EQ(l.applied, l.name.find("out_proj") == std::string::npos) << l.name;
    if (!l.applied) EXPECT_TRUE(same_bits(folded.at(l.name + ".weight"), sd.at(l.name + ".weight"))) << l.name;
    EXPECT_FALSE(folded.count(l.name + ".scores") || folded.count(l.name + ".scale") || folded.count(l.name + ".shift"));
  }
  EXPECT_FALSE(has_supermasks(folded));
}

TEST(SupermaskGolden, FoldMatchesSuperBlockBitForBit) {
  const nlohmann::json g = golden();
  expect_fold_matches("train_bf16", g["train_bf16"]["sparsity"].get<double>(), "", "");
  expect_fold_matches("train_bf16", g["train_bf16"]["sparsity"].get<double>(), "model_ema", "ema.");
  expect_fold_matches("state_dict_f32", g["state_dict_f32"]["sparsity"].get<double>(), "", "");
}

TEST(SupermaskGolden, TrainingCheckpointArgsAreReadAsData) {
  TorchCheckpoint ck = load_torch_checkpoint_with_settings(kDir + "/train_bf16.pth");
  EXPECT_EQ(ck.settings["args.sparsity_linear"], "0.9");
  EXPECT_EQ(ck.settings["args.sp_linear_tile_size"], "16");
  EXPECT_EQ(ck.settings["args.skip_last_layer_sparsity"], "False");
  EXPECT_EQ(ck.settings["args.weights"], "None");
  EXPECT_EQ(ck.settings["args.model"], "vit_tiny");
  EXPECT_EQ(ck.settings["epoch"], "2");
  EXPECT_EQ(ck.settings["lr_scheduler.gamma"], "0.5");
  EXPECT_TRUE(ck.state_dict.count("heads.head.scores"));
  EXPECT_EQ(ck.state_dict.at("heads.head.weight").dtype(), DType::BF16);
  // The plain loader picks "model" too.
  EXPECT_EQ(load_state_dict(kDir + "/train_bf16.pth").size(), ck.state_dict.size());
  // Other entries by name: the EMA weights; not the optimizer, nor a missing one.
  EXPECT_TRUE(load_torch_checkpoint_with_settings(kDir + "/train_bf16.pth", "model_ema").state_dict.count("n_averaged"));
  expect_error<CheckpointError>([] { load_torch_checkpoint_with_settings(kDir + "/train_bf16.pth", "optimizer"); },
                                {"'optimizer'", "without tensors"});
  expect_error<CheckpointError>([] { load_torch_checkpoint_with_settings(kDir + "/train_bf16.pth", "ema"); },
                                {"no entry 'ema'", "'model_ema'", "'model'"});
  // The state_dict API says what the scores are rather than calling them unused tensors.
  expect_error<CheckpointError>(
      [] { vit_from_state_dict(load_state_dict(kDir + "/state_dict_f32.pth"), Device::CPU, DType::F32, kHeads); },
      {"Supermask", "vitrt sparsify --supermask"});
}

std::string sparsify(const std::string& name, const std::string& args, std::string* text, int expect_code = 0) {
  const std::string out = kTmp + "/supermask_" + name + ".vitrt";
  std::filesystem::create_directories(kTmp);
  std::filesystem::remove(out);
  const auto r = test::run_cli("sparsify -q --supermask " + args + " --out " + out);
  EXPECT_EQ(r.code, expect_code) << r.out;
  if (text) *text = r.out;
  return out;
}

Tensor golden_inputs(const nlohmann::json& g) {
  const int64_t s = golden()["config"]["image_size"].get<int64_t>();
  const std::vector<float> x = g["inputs_nhwc"].get<std::vector<float>>();
  return Tensor::from_vector(x, {g["batch"].get<int64_t>(), s, s, 3});
}

// max |got - want| / max |want| (printed: BENCHMARKS.md quotes it)
double max_rel(const Tensor& got, const std::vector<float>& want) {
  EXPECT_EQ(static_cast<size_t>(got.numel()), want.size());
  double err = 0, ref = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    ref = std::max(ref, std::abs(static_cast<double>(want[i])));
    err = std::max(err, std::abs(static_cast<double>(got.data<float>()[i]) - want[i]));
  }
  std::printf("logits against SuperBlock's model: max rel. error %.3g\n", err / std::max(ref, 1e-30));
  return err / std::max(ref, 1e-30);
}

// The packed file's MLP weights are BSR with exactly the kept tiles as blocks (block == tile), and
// the sparse model's logits are SuperBlock's trained model's.
TEST(SupermaskGolden, SparsifiedTrainingCheckpointMatchesTheTrainedModel) {
  const nlohmann::json g = golden()["train_bf16"];
  std::string text;
  // sparsity and tile from the checkpoint's args; block = tile = 16; the head count recorded.
  const std::string path = sparsify("train", "--num-heads 2 --checkpoint " + kDir + "/train_bf16.pth", &text);
  EXPECT_NE(text.find("out_proj"), std::string::npos) << text;
  EXPECT_NE(text.find("Supermask ignored"), std::string::npos) << text;
  // 128 tiles at 0.9: 14 survive, 15 where bfloat16 scores tie at the threshold (layer 0's mlp.0).
  EXPECT_NE(text.find("kept 14 / 128 tiles"), std::string::npos) << text;
  EXPECT_NE(text.find("kept 15 / 128 tiles"), std::string::npos) << text;
  EXPECT_NE(text.find("kept 2 / 8 tiles"), std::string::npos) << text;  // the head, at 0.875
  io::ModelFile f = io::load_model_file(path);
  ASSERT_EQ(f.sparse.size(), 4u);
  const StateDict want = load_torch_checkpoint(kDir + "/train_bf16.folded.pth");
  for (const auto& [name, m] : f.sparse) {  // the stored blocks: exactly the kept tiles
    EXPECT_EQ(m.block, 16) << name;
    EXPECT_EQ(m.nnz_blocks(), bsr_from_dense(want.at(name), 16).nnz_blocks()) << name;
    EXPECT_TRUE(m.nnz_blocks() == 14 || m.nnz_blocks() == 15) << name;
  }
  EXPECT_EQ(f.metadata.at("sparsify.method"), "supermask");
  EXPECT_EQ(f.metadata.at("vit.num_heads"), "2");
  auto model = load_vit(path);  // 2 heads from the file, not hidden / 64 = 1
  EXPECT_EQ(vit_config(*model).num_heads, kHeads);
  EXPECT_LT(max_rel(vit_logits(*model, golden_inputs(g)), g["logits"].get<std::vector<float>>()), 1e-5);

  // The EMA weights: their own logits.
  const std::string ema = sparsify("train_ema", "--ema --checkpoint " + kDir + "/train_bf16.pth", nullptr);
  auto ema_model = load_vit(ema, Device::CPU, DType::F32, kHeads);
  EXPECT_LT(max_rel(vit_logits(*ema_model, golden_inputs(g)), g["ema_logits"].get<std::vector<float>>()), 1e-5);
}

TEST(SupermaskGolden, SparsifiedStateDictMatchesAtEveryBlockDividingTheTile) {
  const nlohmann::json g = golden()["state_dict_f32"];
  std::string text;
  // A bare state_dict does not record its sparsity.
  sparsify("f32_nosparsity", "--checkpoint " + kDir + "/state_dict_f32.pth", &text, 1);
  EXPECT_NE(text.find("does not record the sparsity"), std::string::npos) << text;
  for (int block : {0, 16}) {  // 0: the default, the tile (32)
    SCOPED_TRACE(block);
    const std::string args = "--checkpoint " + kDir + "/state_dict_f32.pth --sparsity 0.5" +
                             (block ? " --block " + std::to_string(block) : "");
    const std::string path = sparsify("f32_b" + std::to_string(block), args, &text);
    io::ModelFile f = io::load_model_file(path);
    ASSERT_EQ(f.sparse.size(), 4u);
    for (const auto& [name, m] : f.sparse) {
      EXPECT_EQ(m.block, block ? block : 32) << name;
      EXPECT_NEAR(m.density(), 0.5, 0.26) << name;  // 4 of 8 tiles (more on ties)
    }
    auto model = load_vit(path, Device::CPU, DType::F32, kHeads);
    EXPECT_LT(max_rel(vit_logits(*model, golden_inputs(g)), g["logits"].get<std::vector<float>>()), 1e-5);
  }
  // A tile the checkpoint's shapes refute.
  sparsify("f32_badtile", "--checkpoint " + kDir + "/state_dict_f32.pth --sparsity 0.5 --tile 16", &text, 1);
  EXPECT_NE(text.find("do not tile"), std::string::npos) << text;
}

// load_vit takes SuperBlock's training checkpoint as it is: folded at its recorded sparsity, the MLPs
// block-sparse, SuperBlock's logits; `vitrt classify` on it too. A bare state_dict does not record
// its sparsity: that load asks for it.
TEST(SupermaskGolden, TrainingCheckpointLoadsAsItIs) {
  const nlohmann::json g = golden()["train_bf16"];
  auto model = load_vit(kDir + "/train_bf16.pth");
  EXPECT_EQ(vit_num_bsr_linears(*model), 4);
  EXPECT_EQ(vit_config(*model).num_heads, kHeads);  // (hidden 128 / 64: its args.model is no preset)
  EXPECT_LT(max_rel(vit_logits(*model, golden_inputs(g)), g["logits"].get<std::vector<float>>()), 1e-5);
  expect_error<InvalidArgument>([] { load_vit(kDir + "/state_dict_f32.pth"); },
                                {"does not record the sparsity", "vitrt sparsify --supermask --sparsity"});
}

// `vitrt bench --checkpoint`: a model file's own BSR weights against their dense twin.
TEST(SupermaskGolden, BenchTimesTheFilesOwnWeights) {
  const std::string path = sparsify("bench", "--checkpoint " + kDir + "/train_bf16.pth", nullptr);
  const auto r = test::run_cli("bench --checkpoint " + path + " --batch 2 --iters 1 --warmup 0 --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["model"], "supermask_bench.vitrt");
  EXPECT_EQ(j["weights"], path);
  EXPECT_EQ(j["block"], 16);
  EXPECT_DOUBLE_EQ(j["mlp_density"].get<double>(), 57.0 / 512.0);
  EXPECT_EQ(j["bsr_linears"], 4);
  EXPECT_GT(j["dense_ms_per_batch"].get<double>(), 0.0);
  EXPECT_GT(j["sparse_ms_per_batch"].get<double>(), 0.0);
  // A checkpoint without BSR weights is not a model file to time.
  const auto bad = test::run_cli("bench --checkpoint " + kDir + "/train_bf16.pth --batch 1 --iters 1");
  EXPECT_EQ(bad.code, 1) << bad.out;
  EXPECT_NE(bad.out.find("not a vitrt model file"), std::string::npos) << bad.out;
}

// The recorded head count: a file's own, overridden by the caller; nonsense refused.
TEST(SupermaskGolden, RecordedHeadCountIsReadAndChecked) {
  const std::string path = sparsify("heads", "--num-heads 4 --checkpoint " + kDir + "/train_bf16.pth", nullptr);
  EXPECT_EQ(vit_config(*load_vit(path)).num_heads, 4);
  EXPECT_EQ(vit_config(*load_vit(path, Device::CPU, DType::F32, 2)).num_heads, 2);
  io::ModelFile f = io::load_model_file(path);
  for (const char* bad : {"x", "0", "99999999", ""}) {
    SCOPED_TRACE(bad);
    f.metadata["vit.num_heads"] = bad;
    const std::string bad_path = kTmp + "/supermask_bad_heads.vitrt";
    io::write_model_file(bad_path, f.dense, f.sparse, f.metadata);
    expect_error<CheckpointError>([&] { load_vit(bad_path); }, {"vit.num_heads"});
  }
}

TEST(SupermaskGolden, MagnitudePruningRefusesASupermaskCheckpoint) {
  std::string text;
  const auto r = test::run_cli("sparsify -q --checkpoint " + kDir + "/state_dict_f32.pth --out " + kTmp +
                               "/supermask_refused.vitrt");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("add --supermask"), std::string::npos) << r.out;
  const auto e = test::run_cli("sparsify -q --ema --checkpoint " + kDir + "/state_dict_f32.pth --out " + kTmp +
                               "/supermask_refused.vitrt");
  EXPECT_NE(e.out.find("--ema goes with --supermask"), std::string::npos) << e.out;
}

}  // namespace
}  // namespace vitrt
