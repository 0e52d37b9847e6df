// The HTTP side of `vitrt serve`: routes, request parsing and validation, error mapping, and the
// glue between the embedding cache, the encode queue and the decode workers. API.md documents
// what a client sees; this file is organised in the same order (helpers, embed, segment,
// everything, health/metrics/page, then the server object).
#include "server/server.h"

#include <httplib.h>
#include <malloc.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <thread>

#include "models/sam/sam_model.h"
#include "server/byte_lru.h"
#include "server/codec.h"
#include "server/metrics.h"
#include "server/web_assets.h"  // generated from src/server/web/ at build time
#include "server/work_queue.h"

#if VITRT_SERVER_WITH_AMG
#include "vitrt/amg.h"
#endif

namespace vitrt::server {

bool everything_available() { return VITRT_SERVER_WITH_AMG != 0; }

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// An error with the HTTP status it should be answered with.
class HttpError : public std::runtime_error {
 public:
  HttpError(int status, const std::string& reason) : std::runtime_error(reason), status(status) {}
  int status;
};

// Answers are serialised with invalid UTF-8 replaced (U+FFFD), not refused: a reason can quote the
// request (a JSON parser's "last read: ..." of a body with stray bytes, a field name, a query value),
// and a throwing dump() inside the error path left the client a bare 500 (found by fuzz_server_segment).
std::string dump_lenient(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void send_error(httplib::Response& res, int status, const std::string& reason) {
  res.status = status;
  res.set_content(dump_lenient(json{{"error", reason}, {"status", status}}) + "\n", "application/json");
}

// The body is moved in, not copied (set_content copies; answers with masks can be large).
void send_json(httplib::Response& res, const json& j) {
  res.body = dump_lenient(j);
  res.body += '\n';
  res.set_header("Content-Type", "application/json");
}

// "image/png; charset=x" -> "image/png"
std::string media_type(const httplib::Request& req) {
  std::string t = req.get_header_value("Content-Type");
  t = t.substr(0, t.find(';'));
  while (!t.empty() && t.back() == ' ') t.pop_back();
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return std::tolower(c); });
  return t;
}

bool is_image_type(const std::string& t) {
  return t == "image/png" || t == "image/jpeg" || t == "image/jpg" || t == "application/octet-stream";
}

// The endpoint label used in metrics: known routes as they are, anything else "other", so that
// random paths cannot blow up the number of series.
std::string endpoint_label(const std::string& path) {
  static const std::set<std::string> known = {"/",           "/app.js",        "/style.css",  "/v1/embed",
                                              "/v1/segment", "/v1/everything", "/v1/classify", "/v1/health",
                                              "/metrics"};
  return known.count(path) ? path : "other";
}

// Low-res logits of one /v1/segment answer, kept so that the next click can name them
// (mask_input_id) instead of sending 256 KiB of floats back.
struct StoredLogits {
  std::string embedding_id;
  Tensor low_res;  // [K, m4, m4]
};

// A JSON object's fields, checked against the names an endpoint knows, so that a typo
// ("multimak") is a 400 with the list of known names rather than silently ignored.
void check_fields(const json& obj, std::initializer_list<const char*> known, const char* where) {
  for (const auto& [key, value] : obj.items()) {
    bool ok = false;
    for (const char* k : known) ok |= key == k;
    if (!ok) {
      std::string list;
      for (const char* k : known) list += std::string(list.empty() ? "" : ", ") + k;
      throw HttpError(400, detail::concat("unknown field '", key, "' in ", where, "; known fields: ", list));
    }
  }
}

double number(const json& v, const std::string& what) {
  if (!v.is_number()) throw HttpError(400, what + " must be a number, got " + std::string(v.type_name()));
  const double d = v.get<double>();
  if (!std::isfinite(d)) throw HttpError(400, what + " must be finite");
  return d;
}

bool boolean(const json& obj, const char* key, bool fallback) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) throw HttpError(400, std::string(key) + " must be true or false, got " + it->type_name());
  return it->get<bool>();
}

}  // namespace

// ---------------------------------------------------------------------------------------------

struct SamServer::Impl {
  std::shared_ptr<const SamModel> model;
  ServerOptions opt;
  Metrics metrics;
  ByteLru<ImageEmbedding> embeddings;
  ByteLru<StoredLogits> logits;
  std::unique_ptr<EncodeBatcher> batcher;
  std::unique_ptr<WorkQueue> decoders;
  std::unique_ptr<WorkQueue> everything_queue;
  std::unique_ptr<ClassifyBatcher> classify_queue;  // when a classifier is loaded
  httplib::Server http;
  std::thread listener;
  std::atomic<int> bound_port{-1};
  Clock::time_point started = Clock::now();
  std::mutex id_mu;
  std::mt19937_64 id_rng{std::random_device{}()};
  std::atomic<uint64_t> served{0};  // requests answered (the trimmer runs only after activity)
  std::mutex trim_mu;
  std::condition_variable trim_cv;
  bool trim_stop = false;
  std::thread trimmer;

  Impl(std::shared_ptr<const SamModel> m, ServerOptions o)
      : model(std::move(m)),
        opt(std::move(o)),
        embeddings(opt.embedding_cache_bytes),
        logits(opt.logits_cache_bytes) {
    VITRT_CHECK(model != nullptr, InvalidArgument, "the server needs a model");
    VITRT_CHECK(opt.http_threads >= 1 && opt.decode_workers >= 1 && opt.decode_queue >= 1 && opt.max_points >= 1,
                InvalidArgument, "server options: threads, workers, queues and max_points must be >= 1");
    if (opt.tune_malloc) {
      // Allocations up to 32 MiB (every decode tensor) come from the heap and stay there when
      // freed; only an idle server gives memory back (trim_loop). Set before any thread starts.
      mallopt(M_MMAP_THRESHOLD, 32 << 20);
      mallopt(M_TRIM_THRESHOLD, 1 << 30);
      // Fewer arenas than glibc's 8 per core: each keeps its own high-water mark of free memory.
      mallopt(M_ARENA_MAX, 4);
    }
    batcher = std::make_unique<EncodeBatcher>(model, opt.encode, metrics,
                                              [this](const std::string& key, const EncodeBatcher::Result& e) {
                                                embeddings.put(key, e, embedding_bytes(*e));
                                              });
    const int decode_threads = opt.decode_threads;
    decoders = std::make_unique<WorkQueue>("the decode", opt.decode_workers, opt.decode_queue, [decode_threads] {
      if (decode_threads > 0) omp_set_num_threads(decode_threads);
    });
    everything_queue = std::make_unique<WorkQueue>("the segment-everything", 1, 2);
    if (opt.classifier) {
      VITRT_CHECK(opt.class_names.empty() ||
                      static_cast<int>(opt.class_names.size()) == vit_config(*opt.classifier).num_classes,
                  InvalidArgument, "server options: ", opt.class_names.size(), " class names for a classifier of ",
                  vit_config(*opt.classifier).num_classes, " classes");
      classify_queue = std::make_unique<ClassifyBatcher>(opt.classifier, opt.classify);
    }
    setup_routes();
    if (opt.tune_malloc && opt.trim_idle_ms > 0) trimmer = std::thread([this] { trim_loop(); });
  }

  ~Impl() {
    {
      std::lock_guard lock(trim_mu);
      trim_stop = true;
    }
    trim_cv.notify_all();
    if (trimmer.joinable()) trimmer.join();
  }

  // Hands freed heap memory back to the system once no request came for trim_idle_ms after
  // some did, and under steady load every 15 idle intervals (30 s by default): resident memory
  // then follows the caches, not the busiest moment of each arena. A trim costs the next
  // requests a burst of page faults, hence not more often.
  void trim_loop() {
    uint64_t seen = served.load();
    bool dirty = false;
    int busy_rounds = 0;
    std::unique_lock lock(trim_mu);
    while (!trim_cv.wait_for(lock, std::chrono::milliseconds(opt.trim_idle_ms), [&] { return trim_stop; })) {
      const uint64_t now = served.load();
      const bool idle = now == seen;
      seen = now;
      if (!idle) dirty = true;
      busy_rounds = idle ? 0 : busy_rounds + 1;
      if (dirty && (idle || busy_rounds >= 15)) {
        malloc_trim(0);
        dirty = false;
        busy_rounds = 0;
      }
    }
  }

  static size_t embedding_bytes(const ImageEmbedding& e) { return e.features.nbytes() + 256; }

  std::string new_logits_id() {
    std::lock_guard lock(id_mu);
    char buf[20];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(id_rng()));
    return buf;
  }

  // ----- images and embeddings -----

  Image decode(const std::string& bytes, const char* what) const {
    if (bytes.empty()) throw HttpError(400, detail::concat(what, " is empty"));
    ImageLimits limits;
    limits.max_pixels = opt.max_image_pixels;
    try {
      return decode_image(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), limits);
    } catch (const Error& e) {
      throw HttpError(400, detail::concat("cannot decode ", what, ": ", e.what()));
    }
  }

  struct Embedded {
    std::string id;
    std::shared_ptr<const ImageEmbedding> embedding;
    bool cached = false;
    double ms = 0;  // time this request spent getting it
  };

  // The embedding of an image: from the cache, from an identical image being encoded right now,
  // or through the encode queue. Never encodes the same pixels twice while they are cached.
  Embedded embed(const Image& image) {
    const auto t0 = Clock::now();
    Embedded out;
    out.id = image_content_hash(image);
    if ((out.embedding = embeddings.get(out.id))) {
      out.cached = true;
      out.ms = ms_since(t0);
      return out;
    }
    std::shared_future<EncodeBatcher::Result> f;
    if (auto pending = batcher->find(out.id)) {
      f = *pending;
    } else {
      std::shared_ptr<const PreparedImage> prepared;
      try {
        prepared = std::make_shared<const PreparedImage>(prepare_image(image, *model));
      } catch (const Error& e) {
        throw HttpError(400, e.what());
      }
      try {
        f = batcher->submit(out.id, std::move(prepared));
      } catch (const Overloaded&) {
        metrics.count_rejection("encode");
        throw;
      }
    }
    if (f.wait_for(std::chrono::seconds(opt.encode_timeout_s)) != std::future_status::ready)
      throw HttpError(503, detail::concat("the image is still being encoded after ", opt.encode_timeout_s,
                                          " s; it will be cached when done: retry later"));
    out.embedding = f.get();
    out.ms = ms_since(t0);
    return out;
  }

  std::shared_ptr<const ImageEmbedding> cached_embedding(const std::string& id) {
    if (auto e = embeddings.get(id)) return e;
    if (auto pending = batcher->find(id)) {  // embedded by another request that is still waiting
      if (pending->wait_for(std::chrono::seconds(opt.encode_timeout_s)) == std::future_status::ready)
        return pending->get();
    }
    throw HttpError(404, "unknown embedding_id '" + id +
                             "': never embedded here, or evicted from the cache; POST the image to /v1/embed again");
  }

  // ----- request bodies -----

  struct Body {
    json fields = json::object();
    std::optional<Image> image;
  };

  // JSON (with an optional base64 "image"), multipart/form-data (an "image" file part and an
  // optional "request" part holding the JSON), or, where allowed, the raw image bytes with the
  // fields in the query string.
  Body parse_body(const httplib::Request& req, bool raw_image_allowed) const {
    Body b;
    const std::string type = media_type(req);
    auto parse_json = [&](const std::string& text, const char* what) {
      json j;
      try {
        j = json::parse(text);
      } catch (const json::parse_error& e) {
        throw HttpError(400, detail::concat("malformed JSON in ", what, ": ", e.what()));
      }
      if (!j.is_object()) throw HttpError(400, detail::concat(what, " must be a JSON object, got ", j.type_name()));
      return j;
    };
    if (type == "application/json") {
      b.fields = parse_json(req.body, "the request body");
      if (auto it = b.fields.find("image"); it != b.fields.end()) {
        if (!it->is_string()) throw HttpError(400, "image must be a base64 string (PNG or JPEG bytes)");
        std::vector<uint8_t> bytes;
        try {
          bytes = base64_decode(it->get_ref<const std::string&>(), "image");
        } catch (const Error& e) {
          throw HttpError(400, e.what());
        }
        b.image = decode(std::string(bytes.begin(), bytes.end()), "image");
        b.fields.erase(it);
      }
    } else if (type == "multipart/form-data") {
      for (const auto& [name, part] : req.files) {
        if (name == "image") {
          b.image = decode(part.content, "the 'image' part");
        } else if (name == "request") {
          b.fields = parse_json(part.content, "the 'request' part");
          if (b.fields.contains("image"))
            throw HttpError(400, "give the image either as the 'image' part or inside 'request', not both");
        } else {
          throw HttpError(400, "unknown multipart part '" + name + "': expected 'image' and optionally 'request'");
        }
      }
    } else if (raw_image_allowed && is_image_type(type)) {
      b.image = decode(req.body, "the request body");
      for (const auto& [key, value] : req.params) {
        try {
          b.fields[key] = json::parse(value);
        } catch (const json::parse_error&) {
          b.fields[key] = value;
        }
      }
    } else {
      throw HttpError(415, detail::concat("unsupported Content-Type '", req.get_header_value("Content-Type"),
                                          "': expected application/json or multipart/form-data",
                                          raw_image_allowed ? ", or the image itself (image/png, image/jpeg)" : ""));
    }
    return b;
  }

  // ----- POST /v1/embed -----

  void handle_embed(const httplib::Request& req, httplib::Response& res) {
    Image image;
    const std::string type = media_type(req);
    if (type == "multipart/form-data") {
      if (!req.has_file("image")) throw HttpError(400, "the multipart body has no 'image' part");
      for (const auto& [name, part] : req.files)
        if (name != "image") throw HttpError(400, "unknown multipart part '" + name + "': expected only 'image'");
      image = decode(req.get_file_value("image").content, "the 'image' part");
    } else if (is_image_type(type)) {
      image = decode(req.body, "the request body");
    } else {
      throw HttpError(415, "unsupported Content-Type '" + req.get_header_value("Content-Type") +
                               "': send the image bytes (image/png, image/jpeg, application/octet-stream) or "
                               "multipart/form-data with an 'image' part");
    }
    std::string mode = req.has_param("embedding") ? req.get_param_value("embedding") : "none";
    if (mode == "none" && req.get_header_value("Accept") == "application/octet-stream") mode = "binary";
    if (mode != "none" && mode != "base64" && mode != "binary")
      throw HttpError(400, "embedding= must be none, base64 or binary, got '" + mode + "'");

    Embedded e = embed(image);
    const ImageEmbedding& emb = *e.embedding;
    const Shape& shape = emb.features.shape();
    if (mode == "binary") {
      res.set_header("X-Vitrt-Embedding-Id", e.id);
      res.set_header("X-Vitrt-Shape", detail::concat(shape[0], ",", shape[1], ",", shape[2], ",", shape[3]));
      res.set_header("X-Vitrt-Original-Size", detail::concat(emb.original_height, ",", emb.original_width));
      res.set_header("X-Vitrt-Input-Size", detail::concat(emb.input_height, ",", emb.input_width));
      res.set_content(static_cast<const char*>(emb.features.raw()), emb.features.nbytes(), "application/octet-stream");
      return;
    }
    json out = {{"embedding_id", e.id},
                {"cached", e.cached},
                {"width", emb.original_width},
                {"height", emb.original_height},
                {"input_size", {emb.input_height, emb.input_width}},
                {"shape", shape},
                {"model", emb.model_fingerprint},
                {"encode_ms", e.ms}};
    if (mode == "base64")
      out["embedding"] = {{"dtype", "float32"}, {"byte_order", "little"}, {"shape", shape},
                          {"data", base64_encode(emb.features.raw(), emb.features.nbytes())}};
    send_json(res, out);
  }

  // ----- POST /v1/segment -----

  Prompt parse_prompt(const json& f, const std::string& embedding_id, const ImageEmbedding& emb) {
    Prompt p;
    std::vector<int> labels;
    if (auto it = f.find("labels"); it != f.end() && !it->is_null()) {
      if (!it->is_array()) throw HttpError(400, "labels must be an array of 1 (foreground) / 0 (background)");
      for (size_t i = 0; i < it->size(); ++i) {
        const json& l = (*it)[i];
        if (!l.is_number_integer() || (l.get<int>() != 0 && l.get<int>() != 1 && l.get<int>() != -1))
          throw HttpError(400, detail::concat("labels[", i, "] must be 1 (foreground), 0 (background) or -1"));
        labels.push_back(l.get<int>());
      }
    }
    if (auto it = f.find("points"); it != f.end() && !it->is_null()) {
      if (!it->is_array()) throw HttpError(400, "points must be an array of [x, y] pairs");
      if (it->size() > static_cast<size_t>(opt.max_points))
        throw HttpError(400, detail::concat(it->size(), " points: at most ", opt.max_points, " per request"));
      for (size_t i = 0; i < it->size(); ++i) {
        const json& pt = (*it)[i];
        if (!pt.is_array() || pt.size() != 2)
          throw HttpError(400, detail::concat("points[", i, "] must be [x, y] (pixels of the original image)"));
        const std::string name = detail::concat("points[", i, "]");
        p.points.push_back({static_cast<float>(number(pt[0], name + "[0]")),
                            static_cast<float>(number(pt[1], name + "[1]")), 1});
      }
      if (!labels.empty() && labels.size() != p.points.size())
        throw HttpError(400, detail::concat(p.points.size(), " points but ", labels.size(),
                                            " labels: give one label per point (or none: all foreground)"));
      for (size_t i = 0; i < labels.size(); ++i) p.points[i].label = labels[i];
    } else if (!labels.empty()) {
      throw HttpError(400, "labels given without points");
    }
    if (auto it = f.find("box"); it != f.end() && !it->is_null()) {
      if (!it->is_array() || it->size() != 4) throw HttpError(400, "box must be [x0, y0, x1, y1]");
      const float v0 = static_cast<float>(number((*it)[0], "box[0]")), v1 = static_cast<float>(number((*it)[1], "box[1]"));
      const float v2 = static_cast<float>(number((*it)[2], "box[2]")), v3 = static_cast<float>(number((*it)[3], "box[3]"));
      p.box = Box{v0, v1, v2, v3};
    }
    const bool has_id = f.contains("mask_input_id") && !f["mask_input_id"].is_null();
    const bool has_raw = f.contains("mask_input") && !f["mask_input"].is_null();
    if (has_id && has_raw) throw HttpError(400, "give mask_input_id or mask_input, not both");
    const int64_t m4 = model->config.low_res_size();
    if (has_id) {
      if (!f["mask_input_id"].is_string()) throw HttpError(400, "mask_input_id must be a string from an earlier answer");
      const std::string id = f["mask_input_id"];
      const size_t dot = id.rfind('.');
      std::shared_ptr<const StoredLogits> stored = dot == std::string::npos ? nullptr : logits.get(id.substr(0, dot));
      int k = -1;
      if (stored) {
        const std::string ks = id.substr(dot + 1);
        if (ks.size() == 1 && ks[0] >= '0' && ks[0] <= '9') k = ks[0] - '0';
        if (k >= stored->low_res.size(0)) k = -1;
      }
      if (!stored || k < 0)
        throw HttpError(404, "unknown mask_input_id '" + id + "': not from this server, or evicted (they are kept in a "
                             "bounded cache); send the logits as mask_input instead");
      if (stored->embedding_id != embedding_id)
        throw HttpError(400, "mask_input_id '" + id + "' belongs to another image (embedding " + stored->embedding_id + ")");
      p.mask_input = stored->low_res.slice0(k, k + 1);
    } else if (has_raw) {
      if (!f["mask_input"].is_string())
        throw HttpError(400, "mask_input must be base64 of float32 little-endian low-res logits");
      std::vector<uint8_t> bytes;
      try {
        bytes = base64_decode(f["mask_input"].get_ref<const std::string&>(), "mask_input");
      } catch (const Error& e) {
        throw HttpError(400, e.what());
      }
      if (bytes.size() != static_cast<size_t>(m4 * m4) * sizeof(float))
        throw HttpError(400, detail::concat("mask_input holds ", bytes.size(), " bytes; expected ", m4, "x", m4,
                                            " float32 = ", m4 * m4 * 4, " bytes"));
      p.mask_input = Tensor::empty({1, m4, m4});
      std::memcpy(p.mask_input.raw(), bytes.data(), bytes.size());
    }
    (void)emb;
    return p;
  }

  void handle_segment(const httplib::Request& req, httplib::Response& res) {
    const auto t0 = Clock::now();
    Body body = parse_body(req, /*raw_image_allowed=*/false);
    const json& f = body.fields;
    check_fields(f, {"embedding_id", "points", "labels", "box", "mask_input_id", "mask_input", "multimask",
                     "multimask_output", "polygons", "return_low_res_logits"},
                 "a /v1/segment request");
    const bool has_id = f.contains("embedding_id") && !f["embedding_id"].is_null();
    if (has_id == body.image.has_value())
      throw HttpError(400, has_id ? "give embedding_id or an image, not both"
                                  : "no image: give embedding_id (from /v1/embed) or the image itself");
    Embedded e;
    if (has_id) {
      if (!f["embedding_id"].is_string()) throw HttpError(400, "embedding_id must be a string");
      e.id = f["embedding_id"];
      e.embedding = cached_embedding(e.id);
      e.cached = true;
    } else {
      e = embed(*body.image);
    }
    const ImageEmbedding& emb = *e.embedding;
    Prompt prompt = parse_prompt(f, e.id, emb);
    const bool multimask = boolean(f, "multimask", boolean(f, "multimask_output", true));
    const bool want_polygons = boolean(f, "polygons", false);
    const bool want_logits = boolean(f, "return_low_res_logits", false);

    // Decode on a worker; validation errors from the predictor come back through the future.
    // The job owns everything it uses, so a request that times out can leave without it. The
    // masks are summarised (RLE, area, box, polygons) there too, one OpenMP thread per mask.
    struct Decoded {
      Prediction pred;
      std::vector<MaskSummary> summaries;
      std::vector<std::vector<std::vector<int>>> polygons;
      double decode_ms = 0, summarise_ms = 0;
    };
    const auto queued = Clock::now();
    std::future<Decoded> fut;
    try {
      fut = decoders->submit([this, embedding = e.embedding, prompt = std::move(prompt), multimask, want_polygons] {
        Decoded d;
        const auto d0 = Clock::now();
        SamPredictor predictor(model);
        predictor.set_embedding(*embedding);
        d.pred = predictor.predict(prompt, multimask, false);
        d.decode_ms = ms_since(d0);
        metrics.observe_decode(d.decode_ms / 1000.0);
        const auto s0 = Clock::now();
        const int H = embedding->original_height, W = embedding->original_width;
        const int K = static_cast<int>(d.pred.masks.size(0));
        const uint8_t* masks = d.pred.masks.data<uint8_t>();
        const size_t plane = static_cast<size_t>(H) * W;
        d.summaries.resize(K);
        d.polygons.resize(want_polygons ? K : 0);
#pragma omp parallel for schedule(dynamic, 1) if (K > 1)
        for (int k = 0; k < K; ++k) {
          d.summaries[k] = summarize_mask(masks + k * plane, H, W);
          if (want_polygons) d.polygons[k] = mask_to_polygons(masks + k * plane, H, W);
        }
        d.summarise_ms = ms_since(s0);
        return d;
      });
    } catch (const Overloaded&) {
      metrics.count_rejection("decode");
      throw;
    }
    if (fut.wait_for(std::chrono::seconds(opt.decode_timeout_s)) != std::future_status::ready)
      throw HttpError(503, detail::concat("decoding did not finish within ", opt.decode_timeout_s, " s; retry later"));
    Decoded d;
    try {
      d = fut.get();
    } catch (const InvalidArgument& err) {
      throw HttpError(400, err.what());
    }
    const Prediction& pred = d.pred;
    const double wait_ms = ms_since(queued) - d.decode_ms - d.summarise_ms;

    const auto p0 = Clock::now();
    const int H = emb.original_height, W = emb.original_width;
    const int64_t K = pred.masks.size(0);
    const std::string logits_id = new_logits_id();
    logits.put(logits_id, std::make_shared<const StoredLogits>(StoredLogits{e.id, pred.low_res_logits}),
               pred.low_res_logits.nbytes() + 128);
    json masks = json::array();
    int64_t best = 0;
    for (int64_t k = 0; k < K; ++k) {
      if (pred.scores[k] > pred.scores[best]) best = k;
      MaskSummary& sum = d.summaries[k];
      json mask = {{"score", pred.scores[k]},
                   {"area", sum.area},
                   {"bbox", sum.bbox},
                   {"segmentation", {{"size", {H, W}}, {"counts", std::move(sum.coco_counts)}}},
                   {"mask_input_id", logits_id + "." + std::to_string(k)}};
      if (want_polygons) mask["polygons"] = std::move(d.polygons[k]);
      if (want_logits) {
        const int64_t n = pred.low_res_logits.numel() / K;
        mask["low_res_logits"] = base64_encode(pred.low_res_logits.data<float>() + k * n, n * sizeof(float));
      }
      masks.push_back(std::move(mask));
    }
    const int64_t m4 = model->config.low_res_size();
    json out = {{"embedding_id", e.id},
                {"width", W},
                {"height", H},
                {"masks", std::move(masks)},
                {"best", best},
                {"low_res_size", {m4, m4}},
                {"timings_ms",
                 {{"embed", has_id ? 0.0 : e.ms}, {"queue", wait_ms}, {"decode", d.decode_ms},
                  {"summarise", d.summarise_ms}, {"encode_output", ms_since(p0)},
                  {"total", ms_since(t0)}}}};
    send_json(res, out);
  }

  // ----- POST /v1/everything -----

  void handle_everything(const httplib::Request& req, httplib::Response& res) {
#if VITRT_SERVER_WITH_AMG
    Body body = parse_body(req, /*raw_image_allowed=*/true);
    const json& f = body.fields;
    check_fields(f, {"points_per_side", "points_per_batch", "pred_iou_thresh", "stability_score_thresh",
                     "stability_score_offset", "box_nms_thresh", "crop_n_layers", "crop_nms_thresh",
                     "crop_overlap_ratio", "crop_n_points_downscale_factor", "min_mask_region_area"},
                 "a /v1/everything request");
    if (!body.image) throw HttpError(400, "no image: send it as the body, a multipart 'image' part or base64 'image'");
    AmgOptions o;
    auto integer = [&](const char* key, auto& dst) {
      if (auto it = f.find(key); it != f.end()) {
        if (!it->is_number_integer()) throw HttpError(400, std::string(key) + " must be an integer");
        dst = it->get<int>();
      }
    };
    auto real = [&](const char* key, double& dst) {
      if (auto it = f.find(key); it != f.end()) dst = number(*it, key);
    };
    int pps = o.points_per_side.value_or(32);
    integer("points_per_side", pps);
    o.points_per_side = pps;
    integer("points_per_batch", o.points_per_batch);
    real("pred_iou_thresh", o.pred_iou_thresh);
    real("stability_score_thresh", o.stability_score_thresh);
    real("stability_score_offset", o.stability_score_offset);
    real("box_nms_thresh", o.box_nms_thresh);
    integer("crop_n_layers", o.crop_n_layers);
    real("crop_nms_thresh", o.crop_nms_thresh);
    real("crop_overlap_ratio", o.crop_overlap_ratio);
    integer("crop_n_points_downscale_factor", o.crop_n_points_downscale_factor);
    integer("min_mask_region_area", o.min_mask_region_area);
    o.output_mode = AmgOutputMode::CocoRle;
    if (pps > 64 || o.crop_n_layers > 2)
      throw HttpError(400, "points_per_side is limited to 64 and crop_n_layers to 2 on this server");
    try {
      o.validate();
    } catch (const InvalidArgument& err) {
      throw HttpError(400, err.what());
    }
    std::future<json> fut;
    try {
      fut = everything_queue->submit([&] {
        SamAutomaticMaskGenerator gen(model, o);
        std::vector<MaskRecord> records = gen.generate(*body.image);
        json list = json::array();
        for (const MaskRecord& r : records)
          list.push_back({{"segmentation", {{"size", {r.segmentation.height, r.segmentation.width}},
                                            {"counts", r.segmentation.coco_counts}}},
                          {"area", r.area},
                          {"bbox", r.bbox},
                          {"predicted_iou", r.predicted_iou},
                          {"point_coords", {r.point_coords}},
                          {"stability_score", r.stability_score},
                          {"crop_box", r.crop_box}});
        return json{{"width", body.image->width}, {"height", body.image->height}, {"masks", std::move(list)},
                    {"timings_ms", {{"total", gen.last_timings().total_ms}, {"encode", gen.last_timings().encode_ms},
                                    {"decode", gen.last_timings().decode_ms}}}};
      });
    } catch (const Overloaded&) {
      metrics.count_rejection("everything");
      throw;
    }
    json out;
    try {
      out = fut.get();
    } catch (const InvalidArgument& err) {
      throw HttpError(400, err.what());
    }
    send_json(res, out);
#else
    (void)req;
    (void)res;
    throw HttpError(501, "segment everything is not available in this build (the automatic mask generator, "
                         "vitrt/amg.h, was not compiled in)");
#endif
  }

  // ----- POST /v1/classify -----

  void handle_classify(const httplib::Request& req, httplib::Response& res) {
    const auto t0 = Clock::now();
    if (!opt.classifier)
      throw HttpError(404, "no classifier is loaded: start vitrt serve with --vit-checkpoint to use /v1/classify");
    Body body = parse_body(req, /*raw_image_allowed=*/true);
    const json& f = body.fields;
    check_fields(f, {"topk", "logits"}, "a /v1/classify request");
    if (!body.image) throw HttpError(400, "no image: give it as the body, an 'image' part or a base64 'image' field");
    const int classes = vit_config(*opt.classifier).num_classes;
    int topk = std::min(5, classes);
    if (auto it = f.find("topk"); it != f.end()) {
      const double k = number(*it, "topk");
      if (k != std::floor(k) || k < 1 || k > classes)
        throw HttpError(400, detail::concat("topk must be a whole number from 1 to ", classes, ", got ", it->dump()));
      topk = static_cast<int>(k);
    }
    const bool want_logits = boolean(f, "logits", false);
    const int W = body.image->width, H = body.image->height;
    // torchvision's eval transform here, on the request's thread (requests preprocess in parallel);
    // the batcher runs the model on the images of concurrent requests together.
    const auto p0 = Clock::now();
    const int crop = vit_config(*opt.classifier).image_size;
    Tensor pixels = vit_preprocess(*body.image, vit_resize_size(crop), crop);
    const double preprocess_ms = ms_since(p0);
    const auto queued = Clock::now();
    std::future<Tensor> fut;
    try {
      fut = classify_queue->submit(std::move(pixels));
    } catch (const Overloaded&) {
      metrics.count_rejection("classify");
      throw;
    }
    if (fut.wait_for(std::chrono::seconds(opt.decode_timeout_s)) != std::future_status::ready)
      throw HttpError(503, detail::concat("classifying did not finish within ", opt.decode_timeout_s, " s; retry later"));
    const Tensor logits = fut.get();
    const double model_ms = ms_since(queued);
    const float* row = logits.data<float>();
    json top = json::array();
    for (const auto& [cls, p] : top_k_softmax(row, classes, topk)) {
      json t = {{"class", cls}, {"prob", p}};
      if (!opt.class_names.empty()) t["name"] = opt.class_names[cls];
      top.push_back(std::move(t));
    }
    json out = {{"width", W}, {"height", H}, {"top", std::move(top)}, {"model", vit_config(*opt.classifier).name},
                {"num_classes", classes}};
    if (want_logits) out["logits"] = std::vector<float>(row, row + classes);
    out["timings_ms"] = {{"preprocess", preprocess_ms}, {"queue_and_model", model_ms}, {"total", ms_since(t0)}};
    send_json(res, out);
  }

  // ----- GET /v1/health, /metrics -----

  json classifier_health() const {
    if (!opt.classifier) return nullptr;
    const VitConfig& v = vit_config(*opt.classifier);
    return {{"model", v.name},
            {"image_size", v.image_size},
            {"num_classes", v.num_classes},
            {"block_sparse_linears", vit_num_bsr_linears(*opt.classifier)},
            {"class_names", !opt.class_names.empty()},
            {"queue", {{"waiting", classify_queue->queue_depth()}, {"running", classify_queue->running()},
                       {"limit", opt.classify.max_queue}, {"max_batch", opt.classify.max_batch}}}};
  }

  json health() const {
    const SamConfig& c = model->config;
    const auto es = embeddings.stats();
    return {{"status", "ok"},
            {"model", c.name},
            {"fingerprint", model->fingerprint},
            {"device", "cpu"},
            {"img_size", c.img_size},
            {"embedding_shape", {1, c.out_chans, c.grid_size(), c.grid_size()}},
            {"low_res_size", c.low_res_size()},
            {"everything", everything_available()},
            {"classifier", classifier_health()},
            {"uptime_s", std::chrono::duration<double>(Clock::now() - started).count()},
            {"cache", {{"entries", es.entries}, {"bytes", es.bytes}, {"capacity_bytes", es.capacity}, {"hits", es.hits},
                       {"misses", es.misses}}},
            {"encode_queue", {{"waiting", batcher->queue_depth()}, {"encoding", batcher->encoding()},
                              {"limit", opt.encode.max_queue}, {"max_batch", opt.encode.max_batch}}},
            {"limits", {{"max_body_bytes", opt.max_body_bytes}, {"max_image_pixels", opt.max_image_pixels},
                        {"max_points", opt.max_points}}}};
  }

  std::string metrics_text() const {
    std::vector<Metrics::Gauge> g;
    const auto es = embeddings.stats(), ls = logits.stats();
    for (const auto& [name, s] : {std::pair<const char*, CacheStats>{"embeddings", es}, {"low_res_logits", ls}}) {
      const std::string l = std::string("cache=\"") + name + "\"";
      g.push_back({"vitrt_cache_hits", l, double(s.hits), "Cache lookups that found the entry (since start)."});
      g.push_back({"vitrt_cache_misses", l, double(s.misses), "Cache lookups that did not (since start)."});
      g.push_back({"vitrt_cache_evictions", l, double(s.evictions), "Entries dropped to stay within the byte limit (since start)."});
      g.push_back({"vitrt_cache_entries", l, double(s.entries), "Entries in the cache."});
      g.push_back({"vitrt_cache_bytes", l, double(s.bytes), "Bytes held by the cache."});
      g.push_back({"vitrt_cache_capacity_bytes", l, double(s.capacity), "Byte limit of the cache."});
    }
    std::sort(g.begin(), g.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
    g.push_back({"vitrt_queue_depth", "queue=\"encode\"", double(batcher->queue_depth()), "Requests waiting in a bounded queue."});
    g.push_back({"vitrt_queue_depth", "queue=\"decode\"", double(decoders->queue_depth()), ""});
    g.push_back({"vitrt_queue_depth", "queue=\"everything\"", double(everything_queue->queue_depth()), ""});
    if (classify_queue)
      g.push_back({"vitrt_queue_depth", "queue=\"classify\"", double(classify_queue->queue_depth()), ""});
    g.push_back({"vitrt_queue_limit", "queue=\"encode\"", double(opt.encode.max_queue), "Bound of each queue (beyond: 503)."});
    g.push_back({"vitrt_queue_limit", "queue=\"decode\"", double(opt.decode_queue), ""});
    g.push_back({"vitrt_in_progress", "stage=\"encode\"", double(batcher->encoding()), "Images or requests being computed now."});
    g.push_back({"vitrt_in_progress", "stage=\"decode\"", double(decoders->running()), ""});
    const double rss = double(resident_memory_bytes());
    g.push_back({"vitrt_process_resident_memory_bytes", "", rss, "Resident memory of the server process."});
    // The model runs on the CPU in this build: its device memory is the process's memory.
    g.push_back({"vitrt_device_memory_bytes", "device=\"cpu\"", rss, "Memory in use on the compute device."});
    g.push_back({"vitrt_uptime_seconds", "", std::chrono::duration<double>(Clock::now() - started).count(), "Seconds since start."});
    return metrics.render(g);
  }

  // ----- routing -----

  // Runs a handler, turning every failure into a JSON error with the right status.
  template <class F>
  httplib::Server::Handler guarded(F f) {
    return [this, f](const httplib::Request& req, httplib::Response& res) {
      try {
        (this->*f)(req, res);
      } catch (const HttpError& e) {
        send_error(res, e.status, e.what());
      } catch (const Overloaded& e) {
        res.set_header("Retry-After", "1");
        send_error(res, 503, e.what());
      } catch (const InvalidArgument& e) {
        send_error(res, 400, e.what());
      } catch (const ImageError& e) {
        send_error(res, 400, e.what());
      } catch (const json::exception& e) {
        send_error(res, 400, std::string("malformed request: ") + e.what());
      } catch (const std::bad_alloc&) {
        send_error(res, 503, "out of memory while handling the request");
      } catch (const std::exception& e) {
        send_error(res, 500, std::string("internal error: ") + e.what());
      }
    };
  }

  void setup_routes() {
    using httplib::Server;
    http.new_task_queue = [n = opt.http_threads] { return new httplib::ThreadPool(n); };
    http.set_payload_max_length(opt.max_body_bytes);
    http.set_read_timeout(opt.read_timeout_s, 0);
    http.set_write_timeout(opt.write_timeout_s, 0);
    http.set_keep_alive_max_count(1000);
    http.set_keep_alive_timeout(5);
    http.set_tcp_nodelay(true);  // small JSON answers: do not wait for Nagle

    http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      request_start() = Clock::now();
      // Without a length httplib would read a chunked body of any size before the limit applies.
      if ((req.method == "POST" || req.method == "PUT") && !req.has_header("Content-Length")) {
        send_error(res, 411, "a Content-Length header is required (chunked uploads are not accepted)");
        res.set_header("Connection", "close");
        return Server::HandlerResponse::Handled;
      }
      return Server::HandlerResponse::Unhandled;
    });
    // Refuse an oversized upload before the client sends it (curl and browsers ask first).
    http.set_expect_100_continue_handler([this](const httplib::Request& req, httplib::Response& res) {
      request_start() = Clock::now();
      const uint64_t len = req.get_header_value<uint64_t>("Content-Length");
      if (len > opt.max_body_bytes) {
        send_error(res, 413, too_large_reason());
        return 413;
      }
      return 100;
    });
    http.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;  // our own JSON error
      switch (res.status) {
        case 404: send_error(res, 404, "no such endpoint: " + req.method + " " + req.path + " (see /v1/health)"); break;
        case 413: send_error(res, 413, too_large_reason()); break;
        case 400: send_error(res, 400, "malformed HTTP request"); break;
        default: send_error(res, res.status, "HTTP error " + std::to_string(res.status));
      }
    });
    http.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
      auto& start = request_start();
      const double s = start ? std::chrono::duration<double>(Clock::now() - *start).count() : 0.0;
      start.reset();
      ++served;
      metrics.observe_request(endpoint_label(req.path), res.status, s);
      if (opt.access_log)
        std::fprintf(stderr, "[vitrt serve] %s %s %d %.1f ms\n", req.method.c_str(), req.path.c_str(), res.status,
                     s * 1000);
    });

    http.Post("/v1/embed", guarded(&Impl::handle_embed));
    http.Post("/v1/segment", guarded(&Impl::handle_segment));
    http.Post("/v1/everything", guarded(&Impl::handle_everything));
    http.Post("/v1/classify", guarded(&Impl::handle_classify));
    http.Get("/v1/health", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(dump_lenient(health()) + "\n", "application/json");
    });
    http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(metrics_text(), "text/plain; version=0.0.4; charset=utf-8");
    });
    auto asset = [this](const char* path, std::string_view content, const char* type) {
      http.Get(path, [content, type](const httplib::Request&, httplib::Response& res) {
        res.set_content(content.data(), content.size(), type);
        res.set_header("Cache-Control", "no-cache");
      });
    };
    asset("/", web::kIndexHtml, "text/html; charset=utf-8");
    asset("/index.html", web::kIndexHtml, "text/html; charset=utf-8");
    asset("/app.js", web::kAppJs, "text/javascript; charset=utf-8");
    asset("/style.css", web::kStyleCss, "text/css; charset=utf-8");
    // A method the endpoint does not take: 405 rather than httplib's 404.
    for (const char* path : {"/v1/embed", "/v1/segment", "/v1/everything", "/v1/classify"})
      http.Get(path, [](const httplib::Request& req, httplib::Response& res) {
        res.set_header("Allow", "POST");
        send_error(res, 405, req.path + " takes POST");
      });
    for (const char* path : {"/v1/health", "/metrics"})
      http.Post(path, [](const httplib::Request& req, httplib::Response& res) {
        res.set_header("Allow", "GET");
        send_error(res, 405, req.path + " takes GET");
      });
  }

  std::string too_large_reason() const {
    return detail::concat("the request body is larger than the limit of ", opt.max_body_bytes,
                          " bytes (vitrt serve --max-body-mb)");
  }

  // Start of the request being handled on this thread (set before routing, read by the logger).
  static std::optional<Clock::time_point>& request_start() {
    thread_local std::optional<Clock::time_point> t;
    return t;
  }
};

// ---------------------------------------------------------------------------------------------

SamServer::SamServer(std::shared_ptr<const SamModel> model, ServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(model), std::move(options))) {}

SamServer::~SamServer() { stop(); }

int SamServer::bind() {
  if (impl_->bound_port >= 0) return impl_->bound_port;
  const ServerOptions& o = impl_->opt;
  int port = -1;
  if (o.port == 0) {
    port = impl_->http.bind_to_any_port(o.host);
  } else if (impl_->http.bind_to_port(o.host, o.port)) {
    port = o.port;
  }
  VITRT_CHECK(port > 0, IoError, "cannot listen on ", o.host, ":", o.port,
              " (address in use, not a local address, or not permitted)");
  impl_->bound_port = port;
  return port;
}

void SamServer::listen() {
  bind();
  impl_->http.listen_after_bind();
}

int SamServer::start() {
  const int port = bind();
  impl_->listener = std::thread([this] { impl_->http.listen_after_bind(); });
  // listen_after_bind() sets is_running() once it accepts; wait for it so a client can connect.
  for (int i = 0; i < 2000 && !impl_->http.is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return port;
}

void SamServer::stop() {
  impl_->http.stop();
  if (impl_->listener.joinable()) impl_->listener.join();
}

int SamServer::port() const { return impl_->bound_port; }

EncodeBatcher& SamServer::encoder() { return *impl_->batcher; }

ClassifyBatcher& SamServer::classifier_queue() {
  VITRT_CHECK(impl_->classify_queue != nullptr, InvalidArgument, "this server has no classifier");
  return *impl_->classify_queue;
}

std::string SamServer::metrics_text() const { return impl_->metrics_text(); }

}  // namespace vitrt::server
