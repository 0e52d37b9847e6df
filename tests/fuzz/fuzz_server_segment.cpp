// POST /v1/segment of `vitrt serve`, in-process on a loopback port, with a small random SAM: every
// input is a request body (JSON, with "$ID" standing for the embedding id of an image embedded once).
// The server must answer every body, with a 2xx or a 4xx and a JSON reason; a 5xx other than 503
// (overload), no answer, or a crash is a finding.
#include <httplib.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "fuzz/fuzz_util.h"
#include "sam_test_util.h"
#include "server/server.h"

namespace {

struct Fixture {
  std::unique_ptr<vitrt::server::SamServer> server;
  int port = 0;
  std::string embedding_id;

  Fixture() {
    vitrt::server::ServerOptions o;
    o.host = "127.0.0.1";
    o.port = 0;
    o.http_threads = 2;
    o.tune_malloc = false;
    server = std::make_unique<vitrt::server::SamServer>(vitrt::test::small_model(), o);
    port = server->start();
    const std::vector<uint8_t> png = vitrt::encode_png(vitrt::test::random_image(40, 30));
    auto r = client().Post("/v1/embed", std::string(png.begin(), png.end()), "image/png");
    if (!r || r->status != 200) std::abort();
    embedding_id = nlohmann::json::parse(r->body)["embedding_id"];
  }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(60, 0);
    return c;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Fixture fx;
  std::string body(reinterpret_cast<const char*>(data), size);
  for (size_t at = body.find("$ID"); at != std::string::npos; at = body.find("$ID", at + fx.embedding_id.size()))
    body.replace(at, 3, fx.embedding_id);
  auto r = fx.client().Post("/v1/segment", body, "application/json");
  if (!r) {
    std::fprintf(stderr, "no answer: %s\n", httplib::to_string(r.error()).c_str());
    std::abort();
  }
  static const bool verbose = std::getenv("VITRT_FUZZ_VERBOSE") != nullptr;
  if (verbose) std::fprintf(stderr, "%d: %.160s\n", r->status, r->body.c_str());
  const bool json_reason = nlohmann::json::accept(r->body);
  if ((r->status >= 500 && r->status != 503) || !json_reason) {
    std::fprintf(stderr, "status %d: %.500s\n", r->status, r->body.c_str());
    std::abort();
  }
  return 0;
}
