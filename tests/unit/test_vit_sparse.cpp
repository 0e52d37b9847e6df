// The block-sparse ViT end to end on the CPU: `vitrt sparsify` on the fixture ViTs, load_vit of the
// resulting vitrt model file (MLP linears through ops::linear_bsr), logits against the same model
// run dense on the folded weights (io::fold_to_dense), layers that stay dense, and bad BSR weights.
#include <gtest/gtest.h>

#include "cli_test_util.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "io/vitrt_model_file.h"
#include "models/vit/vit_model.h"
#include "vitrt/bsr.h"
#include "vitrt/image.h"
#include "vitrt/vit.h"

namespace vitrt {
namespace {

const std::string kDir = std::string(VITRT_FIXTURES) + "/vit";
const std::string kTmp = VITRT_TEST_TMP;

int fixture_heads(const std::string& model) {
  std::ifstream in(kDir + "/" + model + ".pth.json");
  EXPECT_TRUE(in.good()) << "missing " << model << ".pth.json";
  return nlohmann::json::parse(in).at("num_heads").get<int>();
}

// The fixture images, preprocessed for `crop` and stacked into one batch [N, crop, crop, 3].
Tensor fixture_batch(int crop) {
  std::vector<Tensor> xs;
  for (const auto& e : std::filesystem::directory_iterator(kDir + "/images"))
    if (e.path().extension() == ".png") xs.push_back(vit_preprocess(read_image(e.path().string()), vit_resize_size(crop), crop));
  EXPECT_GE(xs.size(), 3u);
  Tensor batch = Tensor::empty({static_cast<int64_t>(xs.size()), crop, crop, 3});
  for (size_t i = 0; i < xs.size(); ++i)
    std::copy_n(xs[i].data<float>(), xs[i].numel(), batch.data<float>() + i * xs[i].numel());
  return batch;
}

// max |got - want| relative to max |want|.
double max_rel(const Tensor& got, const Tensor& want) {
  EXPECT_EQ(got.shape(), want.shape());
  double err = 0, ref = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    ref = std::max(ref, std::abs(static_cast<double>(want.data<float>()[i])));
    err = std::max(err, std::abs(static_cast<double>(got.data<float>()[i]) - want.data<float>()[i]));
  }
  return err / std::max(ref, 1e-30);
}

int argmax_row(const Tensor& logits, int64_t row) {
  const int64_t n = logits.size(1);
  const float* p = logits.data<float>() + row * n;
  return static_cast<int>(std::max_element(p, p + n) - p);
}

// Runs `vitrt sparsify` into a file named after the test (ctest may run tests in parallel).
std::string sparsify(const std::string& model, int block, double sparsity, std::string* out_text = nullptr) {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string test = std::string(info->test_suite_name()) + "_" + info->name();
  std::replace(test.begin(), test.end(), '/', '_');
  const std::string out = kTmp + "/sparse_" + test + "_" + model + "_b" + std::to_string(block) + ".vitrt";
  std::filesystem::remove(out);
  const auto r = test::run_cli("sparsify --checkpoint " + kDir + "/" + model + ".pth --layers mlp --block " +
                               std::to_string(block) + " --sparsity " + std::to_string(sparsity) + " --out " + out);
  EXPECT_EQ(r.code, 0) << r.out;
  if (out_text) *out_text = r.out;
  return out;
}

class VitSparseFixture : public ::testing::TestWithParam<const char*> {};

TEST_P(VitSparseFixture, SparsifiedModelMatchesFoldedDense) {
  const std::string name = GetParam();
  const int heads = fixture_heads(name);
  std::string text;
  const std::string path = sparsify(name, 16, 0.5, &text);

  // The head count comes from the file: `vitrt sparsify` recorded the fixture's sidecar.
  auto sparse = load_vit(path);
  EXPECT_EQ(vit_config(*sparse).num_heads, heads);
  const VitConfig& c = vit_config(*sparse);
  // The fixtures' hidden and MLP sizes are multiples of 16: every MLP linear is packed.
  ASSERT_EQ(c.hidden_dim % 16, 0);
  ASSERT_EQ(c.mlp_dim % 16, 0);
  EXPECT_EQ(vit_num_bsr_linears(*sparse), 2 * c.num_layers);
  EXPECT_EQ(vit_num_fused_mlps(*sparse, 256), 0);  // (the fused kernel is CUDA's)
  EXPECT_NE(text.find(std::to_string(2 * c.num_layers) + " of " + std::to_string(2 * c.num_layers) +
                      " MLP weights packed to BSR"),
            std::string::npos)
      << text;
  // The file holds half of each weight's blocks; the model computes those less what
  // ops::simplify_bsr_mlp took out at load (with 4 or 8 blocks per block-row or -column at half
  // density, some rows and columns are empty: test_bsr.cpp checks that step on its own).
  const io::ModelFile f = io::load_model_file(path);
  int64_t file_blocks = 0, model_blocks = 0;
  for (int i = 0; i < c.num_layers; ++i) {
    const auto& l = sparse->layers[i];
    ASSERT_TRUE(l.mlp_fc1_bsr && l.mlp_fc2_bsr);
    EXPECT_FALSE(l.mlp_fc1.w.defined());
    const std::string lp = "encoder.layers.encoder_layer_" + std::to_string(i) + ".mlp.";
    for (const char* w : {"0.weight", "3.weight"}) {
      const BsrMatrix& m = f.sparse.at(lp + w);
      EXPECT_NEAR(m.density(), 0.5, 1e-9) << lp << w;
      file_blocks += m.nnz_blocks();
    }
    model_blocks += l.mlp_fc1_bsr->nnz_blocks() + l.mlp_fc2_bsr->nnz_blocks();
  }
  EXPECT_EQ(model_blocks, file_blocks - sparse->mlp_fc1_blocks_dropped - sparse->mlp_fc2_blocks_folded);

  // The same model run dense on the folded weights, and the unpruned original.
  auto folded = vit_from_state_dict(io::fold_to_dense(f), Device::CPU, DType::F32, heads);
  EXPECT_EQ(vit_num_bsr_linears(*folded), 0);
  auto original = load_vit(kDir + "/" + name + ".pth");
  EXPECT_EQ(vit_num_bsr_linears(*original), 0);

  const Tensor x = fixture_batch(c.image_size);
  const Tensor ls = vit_logits(*sparse, x), lf = vit_logits(*folded, x), lo = vit_logits(*original, x);
  ASSERT_EQ(ls.shape(), (Shape{x.size(0), c.num_classes}));
  const double rel = max_rel(ls, lf);
  EXPECT_LE(rel, 1e-4) << "sparse vs folded dense";
  for (int64_t i = 0; i < x.size(0); ++i) EXPECT_EQ(argmax_row(ls, i), argmax_row(lf, i)) << "image " << i;
  // Pruning half the MLP blocks changes the outputs: the sparse model did not run the original weights.
  EXPECT_GT(max_rel(ls, lo), 1e-3);
  std::printf("[ %s ] sparse vs folded dense: max rel %.3g over %lld images\n", name.c_str(), rel,
              static_cast<long long>(x.size(0)));

  // One image at a time gives the batch's rows (the BSR kernel at M = T tokens).
  const Tensor one = vit_logits(*sparse, x.slice0(0, 1));
  for (int64_t j = 0; j < c.num_classes; ++j)
    EXPECT_NEAR(one.data<float>()[j], ls.data<float>()[j], 1e-4 * (1 + std::abs(ls.data<float>()[j])));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, VitSparseFixture, ::testing::Values("vit_tiny", "vit_tiny_p14"));

TEST(VitSparse, ClassifyCliRunsTheSparseFile) {
  const std::string path = sparsify("vit_tiny", 16, 0.5);
  const auto r = test::run_cli("classify --checkpoint " + path + " --image " + kDir +
                               "/images/square_224.png --num-heads 3 --device cpu --topk 3 -q");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("1. "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("3. "), std::string::npos) << r.out;
}

TEST(VitSparse, WeightsNotMultipleOfBlockStayDense) {
  // vit_tiny: hidden 48 is no multiple of 32, so both MLP weights of every layer stay dense.
  std::string text;
  const std::string path = sparsify("vit_tiny", 32, 0.5, &text);
  EXPECT_NE(text.find("stays dense: shape is not a multiple of block 32"), std::string::npos) << text;
  EXPECT_NE(text.find("0 of 6 MLP weights packed to BSR"), std::string::npos) << text;
  auto m = load_vit(path, Device::CPU, DType::F32, 3);
  EXPECT_EQ(vit_num_bsr_linears(*m), 0);
  auto original = load_vit(kDir + "/vit_tiny.pth");
  const Tensor x = fixture_batch(224).slice0(0, 2);
  EXPECT_EQ(max_rel(vit_logits(*m, x), vit_logits(*original, x)), 0.0);

  // vit_tiny_p14 (hidden 32, MLP 64) packs at block 32.
  const std::string p14 = sparsify("vit_tiny_p14", 32, 0.5);
  EXPECT_EQ(vit_num_bsr_linears(*load_vit(p14, Device::CPU, DType::F32, 2)), 4);
}

TEST(VitSparse, MixedDenseAndSparseLayers) {
  // Only layer 1's mlp.3 block-sparse (library path, no CLI): the other MLP linears run dense.
  StateDict sd = load_state_dict(kDir + "/vit_tiny.pth");
  const std::string key = "encoder.layers.encoder_layer_1.mlp.3.weight";
  std::map<std::string, BsrMatrix> sparse;
  sparse[key] = prune_blocks_by_magnitude(sd.at(key), 16, 0.75);
  StateDict dense = sd;
  dense.erase(key);
  auto m = vit_from_sparse_state_dict(dense, sparse, Device::CPU, DType::F32, 3);
  EXPECT_EQ(vit_num_bsr_linears(*m), 1);
  EXPECT_TRUE(m->layers[1].mlp_fc2_bsr.has_value());
  EXPECT_FALSE(m->layers[1].mlp_fc1_bsr.has_value());

  StateDict folded = dense;
  folded[key] = bsr_to_dense(sparse[key]);
  auto ref = vit_from_state_dict(folded, Device::CPU, DType::F32, 3);
  const Tensor x = fixture_batch(224).slice0(0, 2);
  EXPECT_LE(max_rel(vit_logits(*m, x), vit_logits(*ref, x)), 1e-4);

  // Through a vitrt model file as well.
  const std::string path = kTmp + "/vit_tiny_mixed.vitrt";
  io::write_model_file(path, dense, sparse);
  auto loaded = load_vit(path, Device::CPU, DType::F32, 3);
  EXPECT_EQ(vit_num_bsr_linears(*loaded), 1);
  EXPECT_LE(max_rel(vit_logits(*loaded, x), vit_logits(*ref, x)), 1e-4);
}

TEST(VitSparse, BadSparseWeightsAreClearErrors) {
  const StateDict sd = load_state_dict(kDir + "/vit_tiny.pth");
  auto expect_error = [&](const std::string& name, const BsrMatrix& m, const std::string& want) {
    StateDict dense = sd;
    dense.erase(name);
    std::map<std::string, BsrMatrix> sparse{{name, m}};
    try {
      vit_from_sparse_state_dict(dense, sparse, Device::CPU, DType::F32, 3);
      ADD_FAILURE() << "no error for " << name;
    } catch (const CheckpointError& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  // A BSR weight where the model has none (attention out_proj).
  const std::string out_proj = "encoder.layers.encoder_layer_0.self_attention.out_proj.weight";
  expect_error(out_proj, prune_blocks_by_magnitude(sd.at(out_proj), 16, 0.5), "has no place in the ViT");
  // The wrong shape: mlp.3's weight given for mlp.0.
  const std::string fc1 = "encoder.layers.encoder_layer_0.mlp.0.weight";
  const std::string fc2 = "encoder.layers.encoder_layer_0.mlp.3.weight";
  StateDict dense = sd;
  dense.erase(fc1);
  std::map<std::string, BsrMatrix> wrong{{fc1, prune_blocks_by_magnitude(sd.at(fc2), 16, 0.5)}};
  // mlp_dim comes from layer 0's mlp.0, so layer 0's fc2 is then the misfit.
  EXPECT_THROW(vit_from_sparse_state_dict(dense, wrong, Device::CPU, DType::F32, 3), CheckpointError);
  // Both dense and sparse.
  std::map<std::string, BsrMatrix> twice{{fc2, prune_blocks_by_magnitude(sd.at(fc2), 16, 0.5)}};
  try {
    vit_from_sparse_state_dict(sd, twice, Device::CPU, DType::F32, 3);
    ADD_FAILURE() << "no error for a weight both dense and sparse";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("both dense and block-sparse"), std::string::npos) << e.what();
  }
  // The CPU backend computes in float32 only, sparse or not (CUDA: tests/gpu/test_cuda_bsr.cpp).
  StateDict d2 = sd;
  d2.erase(fc2);
  EXPECT_THROW(vit_from_sparse_state_dict(d2, twice, Device::CPU, DType::BF16, 3), InvalidArgument);
}

}  // namespace
}  // namespace vitrt
