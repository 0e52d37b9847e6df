// The HTTP API of `vitrt serve`, through a real HTTP client (httplib::Client) against a server
// started in this process on a free loopback port: embed and segment round trips (checked against
// the library's own SamPredictor), cache behaviour, batching, overload (503), and every kind of
// malformed request answered with a 4xx and a reason.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <thread>

#include "io/rle.h"
#include "sam_test_util.h"
#include "server/codec.h"
#include "server/server.h"

using json = nlohmann::json;
using namespace vitrt;

namespace {

std::string png_bytes(const Image& im) {
  auto v = encode_png(im);
  return std::string(v.begin(), v.end());
}

// Value of one sample line in Prometheus text (first match of `prefix`), -1 if absent.
double metric(const std::string& text, const std::string& prefix) {
  size_t at = text.find("\n" + prefix + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + prefix.size() + 2));
}

class ServerTest : public ::testing::Test {
 protected:
  void start(server::ServerOptions o = {}) {
    model_ = test::small_model();
    o.host = "127.0.0.1";
    o.port = 0;
    o.http_threads = 16;
    server_ = std::make_unique<server::SamServer>(model_, o);
    port_ = server_->start();
    ASSERT_GT(port_, 0);
  }
  void SetUp() override { start(); }
  void TearDown() override { server_.reset(); }

  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(60, 0);
    return c;
  }
  std::string embed_id(const Image& im) {
    auto r = client().Post("/v1/embed", png_bytes(im), "image/png");
    EXPECT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
    return json::parse(r->body)["embedding_id"];
  }
  httplib::Result segment(const json& req) { return client().Post("/v1/segment", req.dump(), "application/json"); }

  // 4xx with a JSON {"error": reason} that mentions `needle`.
  static void expect_error(const httplib::Result& r, int status, const std::string& needle) {
    ASSERT_TRUE(r) << "no answer";
    EXPECT_EQ(r->status, status) << r->body;
    json j;
    ASSERT_NO_THROW(j = json::parse(r->body)) << r->body;
    ASSERT_TRUE(j.contains("error")) << r->body;
    EXPECT_NE(j["error"].get<std::string>().find(needle), std::string::npos) << j["error"] << " lacks " << needle;
  }

  // What the library itself answers for the same image and prompt.
  Prediction direct(const Image& im, const Prompt& p, bool multimask = true) {
    SamPredictor pred(model_);
    pred.set_image(im);
    return pred.predict(p, multimask);
  }

  std::shared_ptr<SamModel> model_;
  std::unique_ptr<server::SamServer> server_;
  int port_ = 0;
};

TEST_F(ServerTest, HealthAndPage) {
  auto r = client().Get("/v1/health");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  json h = json::parse(r->body);
  EXPECT_EQ(h["status"], "ok");
  EXPECT_EQ(h["fingerprint"], model_->fingerprint);
  EXPECT_EQ(h["embedding_shape"], json({1, 32, 8, 8}));

  auto page = client().Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_NE(page->get_header_value("Content-Type").find("text/html"), std::string::npos);
  EXPECT_NE(page->body.find("<canvas id=\"overlay\""), std::string::npos);
  auto js = client().Get("/app.js");
  ASSERT_TRUE(js);
  EXPECT_NE(js->body.find("/v1/segment"), std::string::npos);
}

TEST_F(ServerTest, EmbedIsCachedByContent) {
  const Image im = test::random_image(60, 40, 5);
  auto r1 = client().Post("/v1/embed", png_bytes(im), "image/png");
  ASSERT_TRUE(r1);
  ASSERT_EQ(r1->status, 200) << r1->body;
  json a = json::parse(r1->body);
  EXPECT_EQ(a["cached"], false);
  EXPECT_EQ(a["width"], 60);
  EXPECT_EQ(a["height"], 40);
  EXPECT_EQ(a["shape"], json({1, 32, 8, 8}));

  // Same pixels again, this time as multipart: same id, from the cache, no second encode.
  httplib::MultipartFormDataItems items = {{"image", png_bytes(im), "a.png", "image/png"}};
  auto r2 = client().Post("/v1/embed", items);
  ASSERT_TRUE(r2);
  ASSERT_EQ(r2->status, 200) << r2->body;
  json b = json::parse(r2->body);
  EXPECT_EQ(b["embedding_id"], a["embedding_id"]);
  EXPECT_EQ(b["cached"], true);
  const std::string m = server_->metrics_text();
  EXPECT_EQ(metric(m, "vitrt_encoded_images_total"), 1);
  EXPECT_EQ(metric(m, "vitrt_cache_hits{cache=\"embeddings\"}"), 1);
}

TEST_F(ServerTest, EmbedReturnsTheEmbeddingItself) {
  const Image im = test::random_image(50, 70, 6);
  SamPredictor pred(model_);
  pred.set_image(im);
  const Tensor& want = pred.embedding().features;

  auto bin = client().Post("/v1/embed?embedding=binary", png_bytes(im), "image/png");
  ASSERT_TRUE(bin);
  ASSERT_EQ(bin->status, 200) << bin->body;
  EXPECT_EQ(bin->get_header_value("Content-Type"), "application/octet-stream");
  EXPECT_EQ(bin->get_header_value("X-Vitrt-Shape"), "1,32,8,8");
  EXPECT_EQ(bin->get_header_value("X-Vitrt-Original-Size"), "70,50");
  ASSERT_EQ(bin->body.size(), want.nbytes());
  EXPECT_EQ(std::memcmp(bin->body.data(), want.raw(), want.nbytes()), 0);

  auto b64 = client().Post("/v1/embed?embedding=base64", png_bytes(im), "image/png");
  ASSERT_TRUE(b64);
  json j = json::parse(b64->body);
  auto bytes = server::base64_decode(j["embedding"]["data"].get<std::string>(), "embedding");
  ASSERT_EQ(bytes.size(), want.nbytes());
  EXPECT_EQ(std::memcmp(bytes.data(), want.raw(), want.nbytes()), 0);
}

TEST_F(ServerTest, SegmentByIdMatchesThePredictor) {
  const Image im = test::random_image(64, 48, 7);
  const std::string id = embed_id(im);
  auto r = segment({{"embedding_id", id}, {"points", {{20.5, 30}, {40, 10}}}, {"labels", {1, 0}}, {"polygons", true}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  json j = json::parse(r->body);

  Prompt p;
  p.points = {{20.5f, 30.f, 1}, {40.f, 10.f, 0}};
  Prediction want = direct(im, p);
  ASSERT_EQ(j["masks"].size(), 3u);
  const size_t plane = 64 * 48;
  for (int k = 0; k < 3; ++k) {
    const json& m = j["masks"][k];
    const uint8_t* wm = want.masks.data<uint8_t>() + k * plane;
    EXPECT_EQ(m["segmentation"]["size"], json({48, 64}));
    EXPECT_EQ(m["segmentation"]["counts"], rle_to_string(rle_counts(wm, 48, 64))) << "mask " << k;
    EXPECT_FLOAT_EQ(m["score"].get<float>(), want.scores[k]);
    EXPECT_EQ(m["area"].get<uint64_t>(), mask_area(wm, 48, 64));
    EXPECT_TRUE(m["polygons"].is_array());
  }
}

TEST_F(ServerTest, SegmentByImageInJsonAndMultipart) {
  const Image im = test::random_image(40, 30, 8);
  Prompt p;
  p.box = Box{5, 4, 30, 25};
  Prediction want = direct(im, p, false);
  const std::string counts = rle_to_string(rle_counts(want.masks.data<uint8_t>(), 30, 40));

  const std::string png = png_bytes(im);
  auto r1 = segment({{"image", server::base64_encode(png.data(), png.size())}, {"box", {5, 4, 30, 25}}, {"multimask", false}});
  ASSERT_TRUE(r1);
  ASSERT_EQ(r1->status, 200) << r1->body;
  json a = json::parse(r1->body);
  ASSERT_EQ(a["masks"].size(), 1u);
  EXPECT_EQ(a["masks"][0]["segmentation"]["counts"], counts);

  httplib::MultipartFormDataItems items = {
      {"image", png, "x.png", "image/png"},
      {"request", json{{"box", {5, 4, 30, 25}}, {"multimask_output", false}}.dump(), "", "application/json"}};
  auto r2 = client().Post("/v1/segment", items);
  ASSERT_TRUE(r2);
  ASSERT_EQ(r2->status, 200) << r2->body;
  json b = json::parse(r2->body);
  EXPECT_EQ(b["masks"][0]["segmentation"]["counts"], counts);
  EXPECT_EQ(b["embedding_id"], a["embedding_id"]);
}

TEST_F(ServerTest, MaskInputByIdAndByValue) {
  const Image im = test::random_image(64, 64, 9);
  const std::string id = embed_id(im);
  auto r1 = segment({{"embedding_id", id}, {"points", {{30, 30}}}, {"return_low_res_logits", true}});
  ASSERT_TRUE(r1);
  ASSERT_EQ(r1->status, 200) << r1->body;
  json first = json::parse(r1->body);
  const int best = first["best"];
  const json& bm = first["masks"][best];

  // The library with the same logits fed back.
  SamPredictor pred(model_);
  pred.set_image(im);
  Prompt p;
  p.points = {{30, 30, 1}};
  Prediction p1 = pred.predict(p);
  p.points.push_back({10, 50, 0});
  p.mask_input = p1.low_res_logits.slice0(best, best + 1).clone();
  Prediction want = pred.predict(p, false);
  const std::string counts = rle_to_string(rle_counts(want.masks.data<uint8_t>(), 64, 64));

  auto r2 = segment({{"embedding_id", id}, {"points", {{30, 30}, {10, 50}}}, {"labels", {1, 0}},
                     {"mask_input_id", bm["mask_input_id"]}, {"multimask", false}});
  ASSERT_TRUE(r2);
  ASSERT_EQ(r2->status, 200) << r2->body;
  EXPECT_EQ(json::parse(r2->body)["masks"][0]["segmentation"]["counts"], counts);

  auto r3 = segment({{"embedding_id", id}, {"points", {{30, 30}, {10, 50}}}, {"labels", {1, 0}},
                     {"mask_input", bm["low_res_logits"]}, {"multimask", false}});
  ASSERT_TRUE(r3);
  ASSERT_EQ(r3->status, 200) << r3->body;
  EXPECT_EQ(json::parse(r3->body)["masks"][0]["segmentation"]["counts"], counts);

  // Logits of one image do not go with another.
  const std::string other = embed_id(test::random_image(64, 64, 10));
  expect_error(segment({{"embedding_id", other}, {"points", {{3, 3}}}, {"mask_input_id", bm["mask_input_id"]}}), 400,
               "another image");
  expect_error(segment({{"embedding_id", id}, {"mask_input_id", "0123456789abcdef.0"}}), 404, "unknown mask_input_id");
  expect_error(segment({{"embedding_id", id}, {"mask_input", "AAAA"}}), 400, "expected 32x32 float32");
}

TEST_F(ServerTest, MalformedRequestsAre4xxWithAReason) {
  const std::string id = embed_id(test::random_image(32, 32, 11));
  auto c = client();
  expect_error(c.Post("/v1/segment", "{\"embedding_id\": ", "application/json"), 400, "malformed JSON");
  expect_error(c.Post("/v1/segment", "[1, 2]", "application/json"), 400, "must be a JSON object");
  // Bytes that are not UTF-8: the reason quotes them (as U+FFFD) instead of failing to serialise (it
  // was a bare 500, found by fuzz_server_segment).
  expect_error(c.Post("/v1/segment", "{\"embedding_id\": \"\xff\xfe\"}", "application/json"), 400, "malformed JSON");
  expect_error(c.Post("/v1/segment", "{}", "text/plain"), 415, "Content-Type");
  expect_error(c.Post("/v1/embed", "{}", "application/json"), 415, "Content-Type");
  expect_error(c.Post("/v1/embed", "", "image/png"), 400, "empty");
  expect_error(c.Post("/v1/embed", "this is not a png", "image/png"), 400, "cannot decode");
  expect_error(segment({{"embedding_id", "feedfacefeedfacefeedfacefeedface"}, {"points", {{1, 1}}}}), 404,
               "unknown embedding_id");
  expect_error(segment({{"points", {{1, 1}}}}), 400, "no image");
  expect_error(segment({{"embedding_id", id}, {"pointz", {{1, 1}}}}), 400, "unknown field 'pointz'");
  expect_error(segment({{"embedding_id", id}, {"points", "1,1"}}), 400, "points must be an array");
  expect_error(segment({{"embedding_id", id}, {"points", {{1}}}}), 400, "points[0] must be [x, y]");
  expect_error(segment({{"embedding_id", id}, {"points", {{1, "a"}}}}), 400, "points[0][1] must be a number");
  expect_error(segment({{"embedding_id", id}, {"points", {{1, 1}}}, {"labels", {1, 0}}}), 400, "1 points but 2 labels");
  expect_error(segment({{"embedding_id", id}, {"points", {{1, 1}}}, {"labels", {7}}}), 400, "labels[0]");
  expect_error(segment({{"embedding_id", id}, {"points", {{100, 1}}}}), 400, "outside the 32x32 image");
  expect_error(segment({{"embedding_id", id}, {"box", {1, 2, 3}}}), 400, "box must be");
  expect_error(segment({{"embedding_id", id}, {"box", {10, 10, 5, 5}}}), 400, "negative size");
  expect_error(segment({{"embedding_id", id}, {"multimask", "yes"}}), 400, "multimask must be true or false");
  expect_error(c.Get("/v1/nothing"), 404, "no such endpoint");
  expect_error(c.Get("/v1/segment"), 405, "takes POST");
  json too_many = {{"embedding_id", id}, {"points", json::array()}};
  for (int i = 0; i < 65; ++i) too_many["points"].push_back({1, 1});
  expect_error(segment(too_many), 400, "at most 64");
  // Every answer so far is counted by endpoint and code.
  EXPECT_GE(metric(server_->metrics_text(), "vitrt_http_requests_total{endpoint=\"/v1/segment\",code=\"400\"}"), 10);
}

TEST(ServerLimits, OversizedBodiesAre413) {
  server::ServerOptions o;
  o.port = 0;
  o.max_body_bytes = 4096;
  server::SamServer srv(test::small_model(), o);
  const int port = srv.start();
  httplib::Client c("127.0.0.1", port);
  auto r = c.Post("/v1/embed", std::string(10000, 'x'), "image/png");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  EXPECT_NE(r->body.find("larger than the limit of 4096 bytes"), std::string::npos) << r->body;
  // The server still answers afterwards.
  auto h = c.Get("/v1/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
}

TEST(ServerLimits, ChunkedUploadsWithoutLengthAre411) {
  server::ServerOptions o;
  o.port = 0;
  server::SamServer srv(test::small_model(), o);
  httplib::Client c("127.0.0.1", srv.start());
  // Without a length the size limit could only apply after reading everything: refused up front.
  auto r = c.Post(
      "/v1/embed",
      [](size_t, httplib::DataSink& sink) {
        sink.write("abcd", 4);
        sink.done();
        return true;
      },
      "image/png");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 411);
  EXPECT_NE(r->body.find("Content-Length"), std::string::npos) << r->body;
}

TEST(ServerLimits, ImagesOverThePixelLimitAreRefused) {
  server::ServerOptions o;
  o.port = 0;
  o.max_image_pixels = 1000;
  server::SamServer srv(test::small_model(), o);
  httplib::Client c("127.0.0.1", srv.start());
  auto r = c.Post("/v1/embed", png_bytes(test::random_image(50, 50)), "image/png");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(r->body.find("cannot decode"), std::string::npos) << r->body;
}

TEST_F(ServerTest, ConcurrentClientsGetTheSameAnswers) {
  const Image im = test::random_image(48, 48, 12);
  const std::string id = embed_id(im);
  const json req = {{"embedding_id", id}, {"points", {{24, 24}}}};
  auto ref = segment(req);
  ASSERT_TRUE(ref);
  // Everything but mask_input_id (new for every answer) must be the same for every client.
  auto masks_of = [](const std::string& body) {
    json m = json::parse(body)["masks"];
    for (json& x : m) x.erase("mask_input_id");
    return m.dump();
  };
  const std::string want = masks_of(ref->body);

  std::atomic<int> ok{0}, bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 12; ++t)
    threads.emplace_back([&, t] {
      httplib::Client c("127.0.0.1", port_);
      for (int i = 0; i < 8; ++i) {
        // Half the clients also embed fresh images meanwhile (encodes and decodes interleave).
        if (t % 2 && i % 4 == 0) {
          auto e = c.Post("/v1/embed", png_bytes(test::random_image(40, 30, 100 + t * 10 + i)), "image/png");
          if (!e || e->status != 200) ++bad;
        }
        auto r = c.Post("/v1/segment", req.dump(), "application/json");
        if (r && r->status == 200 && masks_of(r->body) == want)
          ++ok;
        else
          ++bad;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok, 96);
  EXPECT_EQ(bad, 0);
}

TEST(ServerQueue, ConcurrentEncodesAreBatchedAndOverloadIs503) {
  server::ServerOptions o;
  o.port = 0;
  o.encode.max_batch = 4;
  o.encode.max_wait_ms = 0;
  o.encode.max_queue = 3;
  auto model = test::small_model();
  server::SamServer srv(model, o);
  const int port = srv.start();

  // Hold the encoder so that the queue fills deterministically.
  srv.encoder().set_paused(true);
  std::vector<Image> images;
  for (int i = 0; i < 3; ++i) images.push_back(test::random_image(40 + i, 30, 200 + i));
  std::vector<int> status(3, 0);
  std::vector<std::string> ids(3);
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i)
    threads.emplace_back([&, i] {
      httplib::Client c("127.0.0.1", port);
      c.set_read_timeout(60, 0);
      auto r = c.Post("/v1/embed", png_bytes(images[i]), "image/png");
      status[i] = r ? r->status : -1;
      if (r && r->status == 200) ids[i] = json::parse(r->body)["embedding_id"];
    });
  for (int i = 0; i < 5000 && srv.encoder().queue_depth() < 3; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_EQ(srv.encoder().queue_depth(), 3u);

  // Queue full: a fourth distinct image is refused at once, with a reason and Retry-After.
  httplib::Client c("127.0.0.1", port);
  auto full = c.Post("/v1/embed", png_bytes(test::random_image(33, 33, 300)), "image/png");
  ASSERT_TRUE(full);
  EXPECT_EQ(full->status, 503);
  EXPECT_NE(full->body.find("encode queue is full"), std::string::npos) << full->body;
  EXPECT_EQ(full->get_header_value("Retry-After"), "1");
  // An image already queued is joined, not refused.
  std::thread dup([&] {
    httplib::Client c2("127.0.0.1", port);
    auto r = c2.Post("/v1/embed", png_bytes(images[0]), "image/png");
    EXPECT_TRUE(r && r->status == 200);
  });

  srv.encoder().set_paused(false);
  for (auto& t : threads) t.join();
  dup.join();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(status[i], 200);
  const std::string m = srv.metrics_text();
  EXPECT_EQ(metric(m, "vitrt_encode_batches_total"), 1) << "three queued images, one encoder call";
  EXPECT_EQ(metric(m, "vitrt_encoded_images_total"), 3);
  EXPECT_EQ(metric(m, "vitrt_rejected_total{queue=\"encode\"}"), 1);

  // Batched embeddings decode like unbatched ones (same masks as the library's predictor).
  for (int i = 0; i < 3; ++i) {
    SamPredictor pred(model);
    pred.set_image(images[i]);
    Prompt p;
    p.points = {{10, 10, 1}};
    Prediction want = pred.predict(p, false);
    auto r = c.Post("/v1/segment",
                    json{{"embedding_id", ids[i]}, {"points", {{10, 10}}}, {"multimask", false}}.dump(),
                    "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    json j = json::parse(r->body);
    EXPECT_NEAR(j["masks"][0]["score"].get<float>(), want.scores[0], 1e-4);
    const auto counts = rle_from_string(j["masks"][0]["segmentation"]["counts"]);
    const auto got = rle_decode(counts, images[i].height, images[i].width);
    size_t diff = 0;
    for (size_t k = 0; k < got.size(); ++k) diff += got[k] != want.masks.data<uint8_t>()[k];
    EXPECT_LE(diff, got.size() / 200) << "image " << i;
  }
}

TEST_F(ServerTest, MetricsArePrometheusText) {
  embed_id(test::random_image(20, 20, 13));
  // A request's latency is recorded by httplib's logger after its answer is sent, so the client can
  // ask for /metrics a moment before the embed shows there: poll briefly (bounded) for it.
  auto r = client().Get("/metrics");
  for (int attempt = 0; attempt < 100 && r && r->body.find("endpoint=\"/v1/embed\"") == std::string::npos; ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    r = client().Get("/metrics");
  }
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_NE(r->get_header_value("Content-Type").find("text/plain"), std::string::npos);
  for (const char* name :
       {"# TYPE vitrt_http_requests_total counter", "vitrt_http_request_duration_seconds_bucket{endpoint=\"/v1/embed\",le=",
        "vitrt_queue_depth{queue=\"encode\"}", "vitrt_cache_bytes{cache=\"embeddings\"}", "vitrt_encode_batch_size_count",
        "vitrt_process_resident_memory_bytes", "vitrt_device_memory_bytes{device=\"cpu\"}"})
    EXPECT_NE(r->body.find(name), std::string::npos) << name;
}

TEST_F(ServerTest, EverythingIsServedOr501) {
  auto r = client().Post("/v1/everything?points_per_side=4", png_bytes(test::random_image(40, 30, 14)), "image/png");
  ASSERT_TRUE(r);
  if (!server::everything_available()) {
    expect_error(r, 501, "not available");
    return;
  }
  ASSERT_EQ(r->status, 200) << r->body;
  json j = json::parse(r->body);
  EXPECT_EQ(j["width"], 40);
  ASSERT_TRUE(j["masks"].is_array());
  for (const json& m : j["masks"]) {
    EXPECT_EQ(m["segmentation"]["size"], json({30, 40}));
    EXPECT_TRUE(m.contains("predicted_iou") && m.contains("stability_score") && m.contains("crop_box"));
  }
  expect_error(client().Post("/v1/everything?points_per_sid=4", png_bytes(test::random_image(8, 8)), "image/png"), 400,
               "unknown field");
}

// POST /v1/classify with a ViT next to SAM (the torchvision fixture, 10 classes in 3 heads): the
// answer is the library's own top-k, by raw bytes, base64 JSON and multipart; bad options are 400,
// GET 405; health names the classifier. A server without one answers 404.
TEST(ServerClassify, TopKIsTheLibrarysAndBadRequestsAre4xx) {
  server::ServerOptions o;
  o.port = 0;
  o.http_threads = 8;
  const std::string vit_dir = std::string(VITRT_FIXTURES) + "/vit";
  o.classifier = load_vit(vit_dir + "/vit_tiny.pth");
  for (int i = 0; i < 10; ++i) o.class_names.push_back("class " + std::to_string(i));
  server::SamServer srv(test::small_model(), o);
  const int port = srv.start();
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(60, 0);
  const Image im = read_image(vit_dir + "/images/landscape_512x384.png");
  const std::string png = png_bytes(im);
  const auto want = vit_classify(*o.classifier, im, 3);
  auto check = [&](const httplib::Result& r) -> json {
    if (!r || r->status != 200) {
      ADD_FAILURE() << (r ? r->body : std::string("no answer"));
      return json::object();
    }
    const json j = json::parse(r->body);
    EXPECT_EQ(j["width"], 512);
    EXPECT_EQ(j["num_classes"], 10);
    EXPECT_EQ(j["top"].size(), 3u);
    for (int k = 0; k < 3 && k < static_cast<int>(j["top"].size()); ++k) {
      EXPECT_EQ(j["top"][k]["class"], want[k].first);
      EXPECT_NEAR(j["top"][k]["prob"].get<double>(), want[k].second, 1e-6);
      EXPECT_EQ(j["top"][k]["name"], "class " + std::to_string(want[k].first));
    }
    return j;
  };
  check(c.Post("/v1/classify?topk=3", png, "image/png"));
  const json with_logits =
      check(c.Post("/v1/classify", json{{"image", server::base64_encode(png.data(), png.size())}, {"topk", 3},
                                        {"logits", true}}.dump(),
                   "application/json"));
  EXPECT_EQ(with_logits["logits"].size(), 10u);
  httplib::MultipartFormDataItems items = {{"image", png, "x.png", "image/png"},
                                           {"request", json{{"topk", 3}}.dump(), "", "application/json"}};
  check(c.Post("/v1/classify", items));

  auto expect_status = [&](const httplib::Result& r, int status, const std::string& needle) {
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, status) << r->body;
    EXPECT_NE(r->body.find(needle), std::string::npos) << r->body;
  };
  expect_status(c.Post("/v1/classify?topk=11", png, "image/png"), 400, "topk must be a whole number from 1 to 10");
  expect_status(c.Post("/v1/classify?topk=1.5", png, "image/png"), 400, "topk");
  expect_status(c.Post("/v1/classify?top=3", png, "image/png"), 400, "unknown field 'top'");
  expect_status(c.Post("/v1/classify", "not an image", "image/png"), 400, "cannot decode");
  expect_status(c.Post("/v1/classify", json{{"topk", 3}}.dump(), "application/json"), 400, "no image");
  expect_status(c.Get("/v1/classify"), 405, "takes POST");
  const json h = json::parse(c.Get("/v1/health")->body);
  EXPECT_EQ(h["classifier"]["num_classes"], 10);
  EXPECT_EQ(h["classifier"]["class_names"], true);
  srv.stop();

  // Class names that do not fit the head are refused at start.
  o.class_names.pop_back();
  EXPECT_THROW(server::SamServer(test::small_model(), o), InvalidArgument);
  // No classifier: 404, and health says so.
  server::ServerOptions plain;
  plain.port = 0;
  server::SamServer bare(test::small_model(), plain);
  httplib::Client b("127.0.0.1", bare.start());
  expect_status(b.Post("/v1/classify", png, "image/png"), 404, "--vit-checkpoint");
  EXPECT_TRUE(json::parse(b.Get("/v1/health")->body)["classifier"].is_null());
}

// Concurrent /v1/classify requests run as one forward: with the queue held, six requests wait,
// then go as one batch whose answers are each image's own (to the GEMMs' summation order); a
// seventh beyond the queue's limit is 503.
TEST(ServerClassify, ConcurrentRequestsRunAsOneBatch) {
  server::ServerOptions o;
  o.port = 0;
  o.http_threads = 16;
  o.classify.max_batch = 8;
  o.classify.max_queue = 6;
  const std::string vit_dir = std::string(VITRT_FIXTURES) + "/vit";
  o.classifier = load_vit(vit_dir + "/vit_tiny.pth");
  server::SamServer srv(test::small_model(), o);
  const int port = srv.start();
  const std::vector<std::string> names = {"landscape_512x384.png", "portrait_300x517.png", "square_224.png",
                                          "short256_256x341.png", "small_150x97.png", "wide_800x241.png"};
  srv.classifier_queue().set_paused(true);
  std::vector<std::thread> clients;
  std::vector<json> answers(names.size());
  for (size_t i = 0; i < names.size(); ++i)
    clients.emplace_back([&, i] {
      httplib::Client c("127.0.0.1", port);
      c.set_read_timeout(60, 0);
      auto r = c.Post("/v1/classify?topk=10&logits=true", png_bytes(read_image(vit_dir + "/images/" + names[i])),
                      "image/png");
      if (r && r->status == 200) answers[i] = json::parse(r->body);
    });
  for (int t = 0; t < 2000 && srv.classifier_queue().queue_depth() < names.size(); ++t)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_EQ(srv.classifier_queue().queue_depth(), names.size());
  httplib::Client extra("127.0.0.1", port);
  auto full = extra.Post("/v1/classify", png_bytes(read_image(vit_dir + "/images/" + names[0])), "image/png");
  ASSERT_TRUE(full);
  EXPECT_EQ(full->status, 503) << full->body;
  srv.classifier_queue().set_paused(false);
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(srv.classifier_queue().batches(), 1);
  for (size_t i = 0; i < names.size(); ++i) {
    SCOPED_TRACE(names[i]);
    ASSERT_TRUE(answers[i].contains("logits")) << answers[i].dump();
    const Tensor want = vit_image_logits(*o.classifier, std::vector<Image>{read_image(vit_dir + "/images/" + names[i])});
    const auto got = answers[i]["logits"].get<std::vector<float>>();
    ASSERT_EQ(got.size(), 10u);
    for (int k = 0; k < 10; ++k) EXPECT_NEAR(got[k], want.data<float>()[k], 1e-5 * (1 + std::abs(want.data<float>()[k])));
  }
}

TEST(ServerCache, EvictedEmbeddingsAre404AndReEmbedded) {
  server::ServerOptions o;
  o.port = 0;
  o.embedding_cache_bytes = 2 * (32 * 8 * 8 * 4 + 256);  // room for two small embeddings
  server::SamServer srv(test::small_model(), o);
  httplib::Client c("127.0.0.1", srv.start());
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    auto r = c.Post("/v1/embed", png_bytes(test::random_image(20, 20, 400 + i)), "image/png");
    ASSERT_TRUE(r);
    ids.push_back(json::parse(r->body)["embedding_id"]);
  }
  auto seg = [&](const std::string& id) {
    return c.Post("/v1/segment", json{{"embedding_id", id}, {"points", {{5, 5}}}}.dump(), "application/json");
  };
  auto gone = seg(ids[0]);
  ASSERT_TRUE(gone);
  EXPECT_EQ(gone->status, 404);
  EXPECT_NE(gone->body.find("evicted"), std::string::npos);
  EXPECT_EQ(seg(ids[2])->status, 200);
  EXPECT_EQ(metric(srv.metrics_text(), "vitrt_cache_evictions{cache=\"embeddings\"}"), 1);
}

TEST(ServerCodec, PolygonsTraceComponents) {
  // Two squares, one with a hole, and two pixels touching only at a corner.
  const int h = 10, w = 12;
  std::vector<uint8_t> m(h * w, 0);
  for (int y = 1; y < 5; ++y)
    for (int x = 1; x < 5; ++x) m[y * w + x] = 1;
  m[2 * w + 2] = 0;  // hole
  for (int y = 6; y < 9; ++y)
    for (int x = 6; x < 11; ++x) m[y * w + x] = 1;
  m[0 * w + 10] = m[1 * w + 11] = 1;
  auto polys = server::mask_to_polygons(m.data(), h, w);
  ASSERT_EQ(polys.size(), 4u);
  EXPECT_EQ(polys[0], (std::vector<int>{1, 1, 5, 1, 5, 5, 1, 5}));    // 16 px inside its outline; hole dropped
  EXPECT_EQ(polys[1], (std::vector<int>{6, 6, 11, 6, 11, 9, 6, 9}));  // 15 px
  EXPECT_EQ(polys[2].size(), 8u);
  EXPECT_EQ(polys[3].size(), 8u);
}

TEST(ServerCodec, MaskSummaryMatchesTheRleLibrary) {
  std::mt19937 rng(5);
  for (auto [h, w] : {std::pair{1, 1}, {7, 3}, {33, 130}, {720, 129}, {64, 64}}) {
    for (int kind = 0; kind < 4; ++kind) {
      std::vector<uint8_t> m(static_cast<size_t>(h) * w);
      for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x)
          m[y * w + x] = kind == 0   ? 0
                         : kind == 1 ? 1
                         : kind == 2 ? (rng() % 3 == 0)
                                     : ((x - w / 2) * (x - w / 2) + (y - h / 3) * (y - h / 3) < h * w / 8) * 7;
      const auto s = server::summarize_mask(m.data(), h, w);
      EXPECT_EQ(s.coco_counts, rle_to_string(rle_counts(m.data(), h, w))) << h << "x" << w << " kind " << kind;
      EXPECT_EQ(s.area, mask_area(m.data(), h, w));
      const auto b = mask_bbox_xywh(m.data(), h, w);
      EXPECT_EQ(s.bbox, (std::array<int64_t, 4>{int64_t(b[0]), int64_t(b[1]), int64_t(b[2]), int64_t(b[3])}));
    }
  }
}

TEST(ServerCodec, Base64RoundTripAndErrors) {
  for (size_t n : {0, 1, 2, 3, 4, 5, 100}) {
    std::vector<uint8_t> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 37 + 1);
    const std::string s = server::base64_encode(v.data(), v.size());
    EXPECT_EQ(server::base64_decode(s, "x"), v);
    EXPECT_EQ(server::base64_decode("data:image/png;base64," + s, "x"), v);
  }
  EXPECT_THROW(server::base64_decode("ab$d", "x"), InvalidArgument);
  EXPECT_THROW(server::base64_decode("a", "x"), InvalidArgument);
}

}  // namespace
