// The `vitrt` command line, run as a user runs it: help texts, segment/embed outputs, the
// embedding and mask-feedback round trips, and clear failures with a non-zero exit code.
#include <gtest/gtest.h>

#include "cli_test_util.h"

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "io/rle.h"
#include "vitrt/image.h"
#include "vitrt/sam.h"

namespace fs = std::filesystem;

namespace {
const std::string kModel = std::string(VITRT_FIXTURES) + "/sam/tiny1024.pth";
const std::string kImage = std::string(VITRT_FIXTURES) + "/sam/images/portrait.png";

using vitrt::test::CliResult;

CliResult run(const std::string& args) { return vitrt::test::run_cli(args); }

std::string tmp(const std::string& name) {
  fs::path p = fs::path(VITRT_TEST_TMP) / ("cli_" + name);
  fs::remove_all(p);
  return p.string();
}

// The command exits with code 1 and says `what`.
void expect_fails_saying(const std::string& args, const std::string& what) {
  const CliResult r = run(args);
  EXPECT_EQ(r.code, 1) << args;
  EXPECT_NE(r.out.find(what), std::string::npos) << r.out;
}

nlohmann::json result_json(const std::string& dir) {
  std::ifstream in(dir + "/result.json");
  return nlohmann::json::parse(in);
}
}  // namespace

TEST(Cli, HelpListsEveryCommandAndOption) {
  CliResult r = run("--help");
  EXPECT_EQ(r.code, 0);
  for (const char* cmd : {"segment", "embed", "bench", "info", "fidelity-check"}) EXPECT_NE(r.out.find(cmd), std::string::npos) << cmd;
  CliResult s = run("segment --help");
  EXPECT_EQ(s.code, 0);
  for (const char* opt : {"--checkpoint", "--image", "--point", "--box", "--mask-input", "--single-mask", "--embedding", "--out"})
    EXPECT_NE(s.out.find(opt), std::string::npos) << opt;
  for (const char* cmd : {"embed", "bench", "info", "fidelity-check"}) EXPECT_EQ(run(std::string(cmd) + " --help").code, 0) << cmd;
}

TEST(Cli, SegmentWritesMasksOverlayAndJson) {
  const std::string out = tmp("segment");
  CliResult r = run("segment --checkpoint " + kModel + " --image " + kImage + " --point 150,200 --point 40,60,0 --out " + out);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("encoding image"), std::string::npos) << "stage timings are printed";
  auto j = result_json(out);
  ASSERT_EQ(j["masks"].size(), 3u);
  EXPECT_TRUE(fs::exists(out + "/overlay.png"));
  vitrt::Image overlay = vitrt::read_image(out + "/overlay.png");
  EXPECT_EQ(overlay.width, 300);
  EXPECT_EQ(overlay.height, 500);
  for (const auto& m : j["masks"]) {
    // The COCO RLE in the JSON decodes to exactly the PNG mask.
    vitrt::Image png = vitrt::read_image(out + "/" + m["png"].get<std::string>());
    auto counts = vitrt::rle_from_string(m["segmentation"]["counts"].get<std::string>());
    auto decoded = vitrt::rle_decode(counts, 500, 300);
    int64_t area = 0;
    for (int i = 0; i < 500 * 300; ++i) {
      ASSERT_EQ(decoded[i] ? 255 : 0, png.pixels[i * 3]) << "pixel " << i;
      area += decoded[i];
    }
    EXPECT_EQ(area, m["area"].get<int64_t>());
    EXPECT_TRUE(fs::exists(out + "/" + m["low_res_logits"].get<std::string>()));
  }
}

TEST(Cli, EmbedThenSegmentGivesTheSameMasks) {
  const std::string a = tmp("direct"), b = tmp("reuse"), emb = tmp("emb.vemb");
  ASSERT_EQ(run("segment -q --checkpoint " + kModel + " --image " + kImage + " --box 20,30,250,400 --single-mask --out " + a).code, 0);
  CliResult e = run("embed --checkpoint " + kModel + " --image " + kImage + " --out " + emb);
  ASSERT_EQ(e.code, 0) << e.out;
  CliResult s = run("segment -q --checkpoint " + kModel + " --image " + kImage + " --embedding " + emb +
              " --box 20,30,250,400 --single-mask --out " + b);
  ASSERT_EQ(s.code, 0) << s.out;
  auto ja = result_json(a), jb = result_json(b);
  ASSERT_EQ(ja["masks"].size(), 1u);
  EXPECT_EQ(ja["masks"][0]["segmentation"], jb["masks"][0]["segmentation"]);
  EXPECT_EQ(ja["masks"][0]["score"], jb["masks"][0]["score"]);
}

// Many images at once: one file per image named after it, each the same embedding as the
// single-image form (batches only change the encoder's summation order); a .txt list (comments,
// blank lines, paths relative to the list) and a directory as inputs, as for `everything`;
// unreadable images stop the run, or are skipped with --keep-going (exit code still 1); inputs that
// would overwrite each other's file are refused before any work.
TEST(Cli, EmbedManyImagesWritesOneFileEach) {
  const std::string dir = std::string(VITRT_FIXTURES) + "/sam/images/";
  const std::string single = tmp("single.vemb"), out = tmp("many"), list = tmp("list.txt"), bad = tmp("bad.png");
  std::ofstream(bad) << "not an image";
  const fs::path listdir = tmp("listdir");  // next to the list: named in it by a relative path
  fs::create_directories(listdir);
  fs::copy_file(dir + "landscape.png", listdir / "landscape.png");
  std::ofstream(list) << "# a comment\n" << listdir.filename().string() << "/landscape.png\n\n" << dir << "tiny.png\r\n";
  ASSERT_EQ(run("embed -q --checkpoint " + kModel + " --image " + kImage + " --out " + single).code, 0);
  CliResult r = run("embed --checkpoint " + kModel + " --image " + kImage + " --image " + list + " --batch 2 --workers 2 --out " + out);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("wrote 3 embeddings"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("batch 2/2"), std::string::npos) << r.out;
  for (const char* stem : {"portrait", "landscape", "tiny"}) EXPECT_TRUE(fs::exists(out + "/" + stem + ".vemb")) << stem;
  const vitrt::ImageEmbedding a = vitrt::load_embedding(single), b = vitrt::load_embedding(out + "/portrait.vemb");
  EXPECT_EQ(b.original_width, 300);
  EXPECT_EQ(b.original_height, 500);
  EXPECT_EQ(a.model_fingerprint, b.model_fingerprint);
  ASSERT_EQ(a.features.shape(), b.features.shape());
  double diff = 0, norm = 0;
  for (int64_t i = 0; i < a.features.numel(); ++i) {
    const double d = a.features.data<float>()[i] - b.features.data<float>()[i];
    diff += d * d;
    norm += static_cast<double>(a.features.data<float>()[i]) * a.features.data<float>()[i];
  }
  EXPECT_LE(std::sqrt(diff / norm), 1e-5);
  EXPECT_EQ(vitrt::load_embedding(out + "/tiny.vemb").original_width, vitrt::read_image(dir + "tiny.png").width);

  const std::string with_bad = "embed -q --checkpoint " + kModel + " --image " + kImage + " --image " + bad;
  expect_fails_saying(with_bad + " --out " + tmp("stop"), "cannot decode image");
  const std::string kept = tmp("kept");
  CliResult k = run(with_bad + " --keep-going --out " + kept);
  EXPECT_EQ(k.code, 1) << k.out;
  EXPECT_NE(k.out.find("skipped " + bad), std::string::npos) << k.out;
  EXPECT_NE(k.out.find("1 of 2 images could not be read"), std::string::npos) << k.out;
  EXPECT_TRUE(fs::exists(kept + "/portrait.vemb"));
  EXPECT_FALSE(fs::exists(kept + "/bad.vemb"));

  const std::string other = tmp("other");
  fs::create_directories(other);
  const std::string twin = other + "/portrait.png";
  fs::copy_file(kImage, twin);
  expect_fails_saying("embed -q --checkpoint " + kModel + " --image " + kImage + " --image " + twin + " --out " +
                          tmp("twins"),
                      "would both be written");
  EXPECT_FALSE(fs::exists(tmp("twins")));
  const std::string empty = tmp("empty.txt");
  std::ofstream(empty) << "# nothing\n";
  expect_fails_saying("embed -q --checkpoint " + kModel + " --image " + empty + " --out " + tmp("none"), "names no images");
  // A directory: its images, sorted, each under its own name.
  const std::string from_dir = tmp("from_dir");
  CliResult d = run("embed -q --checkpoint " + kModel + " --image " + other + " --out " + from_dir);
  ASSERT_EQ(d.code, 0) << d.out;
  EXPECT_NE(d.out.find("wrote 1 embedding to"), std::string::npos) << d.out;
  EXPECT_TRUE(fs::exists(from_dir + "/portrait.vemb"));
  expect_fails_saying("embed -q --checkpoint " + kModel + " --image " + kImage + " --batch -2 --out " + tmp("b"),
                      "--batch must be at least 1");
}

TEST(Cli, LowResLogitsFeedBackAsMaskInput) {
  const std::string a = tmp("first"), b = tmp("second");
  ASSERT_EQ(run("segment -q --checkpoint " + kModel + " --image " + kImage + " --point 100,100 --out " + a).code, 0);
  CliResult r = run("segment -q --checkpoint " + kModel + " --image " + kImage + " --point 100,100 --mask-input " + a +
              "/mask_0_0_low_res_logits.npy --out " + b);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(result_json(b)["masks"].size(), 3u);
}

TEST(Cli, BadInputFailsWithAClearMessage) {
  const std::string segment = "segment -q --checkpoint " + kModel + " --image " + kImage;
  expect_fails_saying(segment + " --point 999,10 --out " + tmp("bad1"), "outside the 300x500 image");
  expect_fails_saying(segment + " --point 10,10,5 --out " + tmp("bad2"), "label");
  expect_fails_saying(segment + " --box 10,10,abc,4 --out " + tmp("bad3"), "not a number");
  CliResult missing = run("segment --checkpoint " + kModel + " --image /nonexistent.png --out " + tmp("bad4"));
  EXPECT_NE(missing.code, 0);
  EXPECT_NE(missing.out.find("/nonexistent.png"), std::string::npos) << missing.out;
  const std::string junk = tmp("junk.pth");
  std::ofstream(junk) << "definitely not a checkpoint";
  expect_fails_saying("segment -q --checkpoint " + junk + " --image " + kImage + " --out " + tmp("bad5"), "error");
  expect_fails_saying("bench --device cuda --model vit_b", "not available");
  // The decoder's own dtype: bf16 needs the GPU; unknown names are refused.
  expect_fails_saying(segment + " --device cpu --decoder-dtype bf16 --out " + tmp("bad6"), "fp32 only");
  expect_fails_saying(segment + " --decoder-dtype fp16 --out " + tmp("bad7"), "decoder dtype 'fp16'");
}

TEST(Cli, FidelityCheckReportsAgreementAndFailsOnATightBar) {
  const std::string fix = std::string(VITRT_FIXTURES) + "/sam/";
  const std::string args = "fidelity-check --checkpoint " + fix + "interp256.pth --config " + fix +
                           "interp256.json --reference " + fix + "out_interp256_portrait.pth --image " + fix +
                           "images/portrait.png";
  CliResult ok = run(args);
  ASSERT_EQ(ok.code, 0) << ok.out;
  const auto j = nlohmann::json::parse(ok.out.substr(ok.out.find('{')));
  EXPECT_TRUE(j["pass"].get<bool>());
  EXPECT_EQ(j["dtype"], "fp32");
  EXPECT_DOUBLE_EQ(j["required_mask_agreement"].get<double>(), 1.0);  // fp32: exact masks
  EXPECT_DOUBLE_EQ(j["min_mask_agreement"].get<double>(), 1.0);
  EXPECT_LT(j["embedding_rel"].get<double>(), 1e-4);
  ASSERT_FALSE(j["cases"].empty());
  for (const auto& c : j["cases"]) EXPECT_EQ(c["mask_mismatch"].get<int64_t>(), 0) << c["case"];
  // A bar tighter than float32 rounding fails, with the JSON still printed.
  CliResult tight = run(args + " --tol 1e-12");
  EXPECT_EQ(tight.code, 1);
  EXPECT_NE(tight.out.find("fidelity check failed"), std::string::npos) << tight.out;
  EXPECT_NE(run(args + " --min-mask-agreement 1.5").code, 0);
}

TEST(Cli, ProfileNeedsCuda) { expect_fails_saying("bench --device cpu --model vit_b --profile", "--profile"); }

// `vitrt info` says what a checkpoint is: SAM, a torchvision ViT, a vitrt model file with BSR
// weights, a SuperBlock Supermask checkpoint; and fails clearly on what is none of them.
TEST(Cli, InfoSaysWhatACheckpointIs) {
  const std::string fixtures = VITRT_FIXTURES;
  auto info = [](const std::string& file) {
    const CliResult r = run("info --checkpoint " + file);
    EXPECT_EQ(r.code, 0) << r.out;
    return r.code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::object();
  };
  const nlohmann::json sam = info(kModel);
  EXPECT_EQ(sam["kind"], "sam");
  EXPECT_EQ(sam["img_size"], 1024);
  const nlohmann::json vit = info(fixtures + "/vit/vit_tiny.pth");
  EXPECT_EQ(vit["kind"], "vit");
  EXPECT_EQ(vit["config"]["hidden_dim"], 48);
  EXPECT_EQ(vit["config"]["num_heads"], 3);  // from vit_tiny.pth.json
  EXPECT_EQ(vit["config"]["tokens"], 197);
  const nlohmann::json sm = info(fixtures + "/supermask/train_bf16.pth");
  EXPECT_EQ(sm["kind"], "supermask");
  EXPECT_EQ(sm["tile"], 16);
  EXPECT_EQ(sm["tile_from"], "args.sp_linear_tile_size");
  EXPECT_DOUBLE_EQ(sm["sparsity"].get<double>(), 0.9);
  EXPECT_EQ(sm["settings"]["epoch"], "2");
  ASSERT_EQ(sm["layers"].size(), 7u);  // 2 x (mlp.0, mlp.3, out_proj) + the head
  EXPECT_EQ(sm["layers"][0]["kept_tiles"], 15);  // 14 of 128, and one tie
  EXPECT_NE(sm["next"].get<std::string>().find("vitrt sparsify --supermask"), std::string::npos);
  EXPECT_EQ(sm["loads_as_is"], true);
  const nlohmann::json bare = info(fixtures + "/supermask/state_dict_f32.pth");
  EXPECT_EQ(bare["tile"], 32);  // from the scores' shapes
  EXPECT_TRUE(bare["sparsity"].is_null());
  EXPECT_EQ(bare["loads_as_is"], false);
  const std::string model = tmp("info_model.vitrt");
  ASSERT_EQ(run("sparsify -q --supermask --checkpoint " + fixtures + "/supermask/train_bf16.pth --out " + model).code, 0);
  const nlohmann::json sparse = info(model);
  EXPECT_EQ(sparse["kind"], "vit_sparse");
  EXPECT_EQ(sparse["metadata"]["sparsify.method"], "supermask");
  EXPECT_EQ(sparse["bsr"].size(), 4u);
  EXPECT_EQ(sparse["bsr"]["encoder.layers.encoder_layer_0.mlp.0.weight"]["nnz_blocks"], 15);
  expect_fails_saying("info --checkpoint " + fixtures + "/checkpoint/garbage.bin", "unrecognised format");
}
