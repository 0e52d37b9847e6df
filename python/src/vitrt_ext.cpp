// vitrt._vitrt: the compiled half of the Python package. It takes arrays that python/vitrt/
// already converted to the exact dtype and layout (so every check and conversion that Python
// users know from the reference lives in Python), runs the C++ library with the GIL released,
// and returns NumPy arrays that own the library's buffers (no copy). vitrt errors become Python
// exceptions of the vitrt.Error family.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <span>

#include "core/device_memory.h"
#include "models/sam/sam_model.h"
#include "vitrt/image.h"
#include "vitrt/sam.h"
#include "vitrt/vit.h"
#if VITRT_PY_WITH_AMG
#include "vitrt/amg.h"
#endif

namespace nb = nanobind;
using namespace nb::literals;

namespace {

using vitrt::Tensor;

// A loaded model (the Python vitrt.Sam holds one).
struct PySam {
  std::shared_ptr<const vitrt::SamModel> model;
  std::string device = "cpu";
};

// A loaded ViT classifier (the Python vitrt.VitClassifier holds one).
struct PyVit {
  std::shared_ptr<const vitrt::VitModel> model;
  std::string device = "cpu";
};

// device "auto" | "cpu" | "cuda" and dtype "fp32" | "bf16" as the CLI's --device / --dtype: "auto" is
// the GPU when this build has the CUDA backend and one is present.
vitrt::Device parse_device(const std::string& device) {
  if (device == "auto") return vitrt::devmem::cuda_available() ? vitrt::Device::CUDA : vitrt::Device::CPU;
  if (device == "cpu") return vitrt::Device::CPU;
  if (device == "cuda") {
    if (!vitrt::devmem::cuda_available())
      throw vitrt::InvalidArgument("device 'cuda' is not available (no CUDA backend in this build, or no GPU found)");
    return vitrt::Device::CUDA;
  }
  throw vitrt::InvalidArgument("unknown device '" + device + "': expected 'auto', 'cpu' or 'cuda'");
}
vitrt::DType parse_dtype(const std::string& dtype, vitrt::Device dev, const char* what = "dtype") {
  if (dtype != "fp32" && dtype != "bf16")
    throw vitrt::InvalidArgument(std::string("unknown ") + what + " '" + dtype + "': expected 'fp32' or 'bf16'");
  const vitrt::DType dt = dtype == "bf16" ? vitrt::DType::BF16 : vitrt::DType::F32;
  if (dev == vitrt::Device::CPU && dt != vitrt::DType::F32) throw vitrt::InvalidArgument("the CPU backend computes in fp32 only");
  return dt;
}

using ImageIn = nb::ndarray<const uint8_t, nb::ndim<3>, nb::c_contig, nb::device::cpu>;
using F32In = nb::ndarray<const float, nb::c_contig, nb::device::cpu>;
using I32In = nb::ndarray<const int32_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

// A NumPy array over a tensor's memory; the capsule keeps the tensor (and its storage) alive.
template <class T>
nb::ndarray<nb::numpy, T> to_numpy(Tensor t) {
  auto* holder = new Tensor(std::move(t));
  nb::capsule owner(holder, [](void* p) noexcept { delete static_cast<Tensor*>(p); });
  std::vector<size_t> shape(holder->shape().begin(), holder->shape().end());
  return nb::ndarray<nb::numpy, T>(holder->raw(), shape.size(), shape.data(), owner);
}

template <class T>
nb::ndarray<nb::numpy, T> vector_to_numpy(std::vector<T> v) {
  auto* holder = new std::vector<T>(std::move(v));
  nb::capsule owner(holder, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  const size_t n = holder->size();
  return nb::ndarray<nb::numpy, T>(holder->data(), 1, &n, owner);
}

vitrt::Image image_from(const ImageIn& a) {
  if (a.shape(2) != 3)
    throw vitrt::InvalidArgument("image must be HxWx3 (RGB), got " + std::to_string(a.shape(2)) + " channels");
  vitrt::Image im;
  im.height = static_cast<int>(a.shape(0));
  im.width = static_cast<int>(a.shape(1));
  im.pixels.assign(a.data(), a.data() + a.size());
  return im;
}

// An image embedding made by embed_images or read from a `vitrt embed` file (the Python
// vitrt.Embedding): set it on a predictor instead of encoding the image again.
struct PyEmbedding {
  vitrt::ImageEmbedding e;
};

std::vector<vitrt::Image> images_from(const std::vector<ImageIn>& arrays) {
  std::vector<vitrt::Image> ims;
  ims.reserve(arrays.size());
  for (const ImageIn& a : arrays) ims.push_back(image_from(a));
  return ims;
}

class PyPredictor {
 public:
  explicit PyPredictor(const PySam& sam) : model_(sam.model), predictor_(sam.model) {}

  void set_image(const ImageIn& image) {
    vitrt::Image im = image_from(image);
    nb::gil_scoped_release release;
    predictor_.set_image(im);
  }

  void set_embedding(const PyEmbedding& e) {
    vitrt::ImageEmbedding copy = e.e;  // (the tensor is shared, not copied)
    nb::gil_scoped_release release;
    predictor_.set_embedding(std::move(copy));
  }

  void reset_image() { predictor_ = vitrt::SamPredictor(model_); }
  bool is_image_set() const { return predictor_.has_image(); }
  std::tuple<int, int> original_size() const {
    const auto& e = predictor_.embedding();
    return {e.original_height, e.original_width};
  }
  std::tuple<int, int> input_size() const {
    const auto& e = predictor_.embedding();
    return {e.input_height, e.input_width};
  }
  nb::ndarray<nb::numpy, float> get_image_embedding() const { return to_numpy<float>(predictor_.embedding().features); }

  // coords [N, 2] / labels [N] / box [4] / mask_input [1, m4, m4]: already float32 / int32 and
  // C-contiguous (python/vitrt/__init__.py converts).
  nb::tuple predict(std::optional<F32In> coords, std::optional<I32In> labels, std::optional<F32In> box,
                    std::optional<F32In> mask_input, bool multimask_output, bool return_logits) const {
    vitrt::Prompt p;
    if (coords) {
      if (coords->ndim() != 2 || coords->shape(1) != 2)
        throw vitrt::InvalidArgument("point_coords must have shape (N, 2)");
      if (!labels || labels->shape(0) != coords->shape(0))
        throw vitrt::InvalidArgument("point_labels must have shape (N,) for point_coords of shape (N, 2)");
      for (size_t i = 0; i < coords->shape(0); ++i)
        p.points.push_back({coords->data()[2 * i], coords->data()[2 * i + 1], labels->data()[i]});
    }
    if (box) {
      if (box->size() != 4) throw vitrt::InvalidArgument("box must have 4 values (x0, y0, x1, y1)");
      p.box = vitrt::Box{box->data()[0], box->data()[1], box->data()[2], box->data()[3]};
    }
    if (mask_input) {
      vitrt::Shape shape;
      for (size_t d = 0; d < mask_input->ndim(); ++d) shape.push_back(static_cast<int64_t>(mask_input->shape(d)));
      p.mask_input = Tensor::empty(shape);
      std::memcpy(p.mask_input.raw(), mask_input->data(), mask_input->size() * sizeof(float));
    }
    vitrt::Prediction r;
    {
      nb::gil_scoped_release release;
      r = predictor_.predict(p, multimask_output, return_logits);
    }
    nb::object masks = return_logits ? nb::cast(to_numpy<float>(r.logits)) : nb::cast(to_numpy<bool>(r.masks));
    return nb::make_tuple(masks, vector_to_numpy<float>(r.scores), to_numpy<float>(r.low_res_logits));
  }

 private:
  std::shared_ptr<const vitrt::SamModel> model_;
  vitrt::SamPredictor predictor_;
};

#if VITRT_PY_WITH_AMG
class PyMaskGenerator {
 public:
  PyMaskGenerator(const PySam& sam, std::optional<int> points_per_side, int points_per_batch, double pred_iou_thresh,
                  double stability_score_thresh, double stability_score_offset, double box_nms_thresh,
                  int crop_n_layers, double crop_nms_thresh, double crop_overlap_ratio,
                  int crop_n_points_downscale_factor, std::optional<std::vector<std::vector<std::vector<double>>>> point_grids,
                  int min_mask_region_area, const std::string& output_mode)
      : gen_(sam.model, [&] {
          vitrt::AmgOptions o;
          o.points_per_side = points_per_side;
          o.points_per_batch = points_per_batch;
          o.pred_iou_thresh = pred_iou_thresh;
          o.stability_score_thresh = stability_score_thresh;
          o.stability_score_offset = stability_score_offset;
          o.box_nms_thresh = box_nms_thresh;
          o.crop_n_layers = crop_n_layers;
          o.crop_nms_thresh = crop_nms_thresh;
          o.crop_overlap_ratio = crop_overlap_ratio;
          o.crop_n_points_downscale_factor = crop_n_points_downscale_factor;
          if (point_grids)
            for (const auto& grid : *point_grids) {
              std::vector<std::array<double, 2>> g;
              for (const auto& pt : grid) {
                if (pt.size() != 2) throw vitrt::InvalidArgument("point_grids: every point must be (x, y)");
                g.push_back({pt[0], pt[1]});
              }
              o.point_grids.push_back(std::move(g));
            }
          o.min_mask_region_area = min_mask_region_area;
          o.output_mode = vitrt::parse_amg_output_mode(output_mode);
          return o;
        }()) {}

  nb::list generate(const ImageIn& image) {
    vitrt::Image im = image_from(image);
    std::vector<vitrt::MaskRecord> records;
    {
      nb::gil_scoped_release release;
      records = gen_.generate(im);
    }
    nb::list out;
    for (vitrt::MaskRecord& r : records) {
      nb::dict d;
      vitrt::MaskSegmentation& s = r.segmentation;
      switch (s.mode) {
        case vitrt::AmgOutputMode::BinaryMask: {
          Tensor t = Tensor::empty({s.height, s.width}, vitrt::DType::U8);
          std::memcpy(t.raw(), s.mask.data(), s.mask.size());
          d["segmentation"] = to_numpy<bool>(std::move(t));
          break;
        }
        case vitrt::AmgOutputMode::UncompressedRle:
        case vitrt::AmgOutputMode::CocoRle: {
          nb::dict rle;
          rle["size"] = std::vector<int>{s.height, s.width};
          if (s.mode == vitrt::AmgOutputMode::CocoRle)
            rle["counts"] = s.coco_counts;
          else
            rle["counts"] = s.counts;
          d["segmentation"] = rle;
          break;
        }
      }
      d["area"] = r.area;
      d["bbox"] = std::vector<int64_t>(r.bbox.begin(), r.bbox.end());
      d["predicted_iou"] = r.predicted_iou;
      d["point_coords"] = std::vector<std::vector<double>>{{r.point_coords[0], r.point_coords[1]}};
      d["stability_score"] = r.stability_score;
      d["crop_box"] = std::vector<int64_t>(r.crop_box.begin(), r.crop_box.end());
      out.append(d);
    }
    return out;
  }

 private:
  vitrt::SamAutomaticMaskGenerator gen_;
};
#endif

}  // namespace

NB_MODULE(_vitrt, m) {
  m.doc() = "vitrt: Segment Anything in C++ (compiled part; use the vitrt package)";

  // vitrt.Error (RuntimeError) and its kinds; the ones a caller causes are also ValueError / OSError,
  // so that `except ValueError` works as with any Python library.
  static PyObject* error = PyErr_NewException("vitrt.Error", PyExc_RuntimeError, nullptr);
  auto derived = [&](const char* name, PyObject* extra) {
    PyObject* bases = extra ? PyTuple_Pack(2, error, extra) : PyTuple_Pack(1, error);
    PyObject* e = PyErr_NewException(name, bases, nullptr);
    Py_DECREF(bases);
    return e;
  };
  static PyObject* checkpoint_error = derived("vitrt.CheckpointError", nullptr);
  static PyObject* image_error = derived("vitrt.ImageError", PyExc_ValueError);
  static PyObject* invalid_argument = derived("vitrt.InvalidArgument", PyExc_ValueError);
  static PyObject* io_error = derived("vitrt.IoError", PyExc_OSError);
  m.attr("Error") = nb::handle(error);
  m.attr("CheckpointError") = nb::handle(checkpoint_error);
  m.attr("ImageError") = nb::handle(image_error);
  m.attr("InvalidArgument") = nb::handle(invalid_argument);
  m.attr("IoError") = nb::handle(io_error);
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const vitrt::CheckpointError& e) {
      PyErr_SetString(checkpoint_error, e.what());
    } catch (const vitrt::ImageError& e) {
      PyErr_SetString(image_error, e.what());
    } catch (const vitrt::InvalidArgument& e) {
      PyErr_SetString(invalid_argument, e.what());
    } catch (const vitrt::IoError& e) {
      PyErr_SetString(io_error, e.what());
    } catch (const vitrt::Error& e) {
      PyErr_SetString(error, e.what());
    }
  });

  nb::class_<PySam>(m, "Sam")
      .def_prop_ro("model_type", [](const PySam& s) { return vitrt::sam_config(*s.model).name; })
      .def_prop_ro("fingerprint", [](const PySam& s) { return vitrt::sam_fingerprint(*s.model); })
      .def_prop_ro("img_size", [](const PySam& s) { return vitrt::sam_config(*s.model).img_size; })
      .def_prop_ro("low_res_size", [](const PySam& s) { return vitrt::sam_config(*s.model).low_res_size(); })
      .def_prop_ro("device", [](const PySam& s) { return s.device; })
      .def_prop_ro("image_format", [](const PySam&) { return "RGB"; })
      .def_prop_ro("mask_threshold", [](const PySam&) { return 0.0; })
      .def("__repr__", [](const PySam& s) {
        return "vitrt.Sam(" + vitrt::sam_config(*s.model).name + ", " + vitrt::sam_fingerprint(*s.model) + ", device='" +
               s.device + "')";
      });

  m.def(
      "_load",
      [](const std::string& checkpoint, const std::string& config, const std::string& device, const std::string& dtype,
         const std::string& decoder_dtype) {
        const vitrt::Device dev = parse_device(device);
        const vitrt::DType dt = parse_dtype(dtype, dev);
        std::optional<vitrt::DType> ddt;  // empty: the decoder in `dtype` too
        if (!decoder_dtype.empty()) ddt = parse_dtype(decoder_dtype, dev, "decoder_dtype");
        nb::gil_scoped_release release;
        return PySam{vitrt::load_sam(checkpoint, config, dev, dt, ddt), dev == vitrt::Device::CUDA ? "cuda" : "cpu"};
      },
      "checkpoint"_a, "config"_a, "device"_a, "dtype"_a, "decoder_dtype"_a);
  m.def(
      "_random_sam",
      [](const std::string& model_type, uint64_t seed) {
        vitrt::SamConfig c;
        if (model_type == "vit_b") c = vitrt::SamConfig::vit_b();
        else if (model_type == "vit_l") c = vitrt::SamConfig::vit_l();
        else if (model_type == "vit_h") c = vitrt::SamConfig::vit_h();
        else throw vitrt::InvalidArgument("model_type must be vit_b, vit_l or vit_h, got '" + model_type + "'");
        nb::gil_scoped_release release;
        return PySam{vitrt::SamModel::from_state_dict(vitrt::sam::random_state_dict(c, seed), c), "cpu"};
      },
      "model_type"_a, "seed"_a);
  m.def(
      "_read_image",
      [](const std::string& path) {
        vitrt::Image im;
        {
          nb::gil_scoped_release release;
          im = vitrt::read_image(path);
        }
        Tensor t = Tensor::empty({im.height, im.width, 3}, vitrt::DType::U8);
        std::memcpy(t.raw(), im.pixels.data(), im.pixels.size());
        return to_numpy<uint8_t>(std::move(t));
      },
      "path"_a);

  nb::class_<PyVit>(m, "Vit")
      .def_prop_ro("name", [](const PyVit& v) { return vitrt::vit_config(*v.model).name; })
      .def_prop_ro("image_size", [](const PyVit& v) { return vitrt::vit_config(*v.model).image_size; })
      .def_prop_ro("patch_size", [](const PyVit& v) { return vitrt::vit_config(*v.model).patch_size; })
      .def_prop_ro("num_classes", [](const PyVit& v) { return vitrt::vit_config(*v.model).num_classes; })
      .def_prop_ro("num_bsr_linears", [](const PyVit& v) { return vitrt::vit_num_bsr_linears(*v.model); })
      .def(
          "num_fused_mlps",
          [](const PyVit& v, int64_t batch) {
            if (batch < 1) throw vitrt::InvalidArgument("batch must be at least 1, got " + std::to_string(batch));
            return vitrt::vit_num_fused_mlps(*v.model, batch);
          },
          "batch"_a, "How many block-sparse MLPs run as one fused CUDA kernel at this batch size.")
      .def_prop_ro("device", [](const PyVit& v) { return v.device; })
      .def("__repr__", [](const PyVit& v) {
        const vitrt::VitConfig& c = vitrt::vit_config(*v.model);
        return "vitrt.Vit(" + c.name + ", " + std::to_string(c.image_size) + "px, patch " + std::to_string(c.patch_size) +
               ", " + std::to_string(c.num_classes) + " classes, device='" + v.device + "')";
      });
  m.def(
      "_load_vit",
      [](const std::string& checkpoint, const std::string& device, const std::string& dtype, int num_heads) {
        const vitrt::Device dev = parse_device(device);
        const vitrt::DType dt = parse_dtype(dtype, dev);
        if (num_heads < 0) throw vitrt::InvalidArgument("num_heads must be positive, got " + std::to_string(num_heads));
        nb::gil_scoped_release release;
        return PyVit{vitrt::load_vit(checkpoint, dev, dt, num_heads), dev == vitrt::Device::CUDA ? "cuda" : "cpu"};
      },
      "checkpoint"_a, "device"_a, "dtype"_a, "num_heads"_a);
  // Logits [N, num_classes] of N RGB images (HxWx3 uint8, any sizes): vit_image_logits on batches
  // of `batch` images.
  m.def(
      "_vit_logits",
      [](const PyVit& v, const std::vector<ImageIn>& images, int batch) {
        if (batch < 1) throw vitrt::InvalidArgument("batch_size must be at least 1, got " + std::to_string(batch));
        const std::vector<vitrt::Image> ims = images_from(images);
        const int classes = vitrt::vit_config(*v.model).num_classes;
        const size_t n = ims.size();
        Tensor out = Tensor::empty({static_cast<int64_t>(n), classes});
        {
          nb::gil_scoped_release release;  // (re-acquired before the NumPy array is made)
          for (size_t first = 0; first < n; first += batch) {
            const size_t count = std::min<size_t>(batch, n - first);
            const Tensor logits = vitrt::vit_image_logits(*v.model, std::span<const vitrt::Image>(ims).subspan(first, count));
            std::memcpy(out.data<float>() + first * classes, logits.data<float>(), count * classes * sizeof(float));
          }
        }
        return to_numpy<float>(std::move(out));
      },
      "vit"_a, "images"_a, "batch"_a);
  // vit_classify: the topk (class, probability) pairs of one image, as `vitrt classify` prints them.
  m.def(
      "_vit_classify",
      [](const PyVit& v, const ImageIn& image, int topk) {
        vitrt::Image im = image_from(image);
        nb::gil_scoped_release release;
        return vitrt::vit_classify(*v.model, im, topk);
      },
      "vit"_a, "image"_a, "topk"_a);

  nb::class_<PyEmbedding>(m, "Embedding")
      // (the array owns a reference to the tensor's storage: no reference_internal)
      .def_prop_ro("features", [](const PyEmbedding& p) { return to_numpy<float>(p.e.features); }, nb::rv_policy::automatic)
      .def_prop_ro("original_size", [](const PyEmbedding& p) { return std::make_tuple(p.e.original_height, p.e.original_width); })
      .def_prop_ro("input_size", [](const PyEmbedding& p) { return std::make_tuple(p.e.input_height, p.e.input_width); })
      .def_prop_ro("model_fingerprint", [](const PyEmbedding& p) { return p.e.model_fingerprint; })
      .def(
          "save",
          [](const PyEmbedding& p, const std::string& path) {
            nb::gil_scoped_release release;
            vitrt::save_embedding(p.e, path);
          },
          "path"_a, "Writes the embedding as `vitrt embed` does (a file for `vitrt segment --embedding`).")
      .def("__repr__", [](const PyEmbedding& p) {
        return "vitrt.Embedding(original_size=(" + std::to_string(p.e.original_height) + ", " +
               std::to_string(p.e.original_width) + "), model " + p.e.model_fingerprint + ")";
      });
  // The embeddings of N RGB images (HxWx3 uint8, any sizes), `batch` images per encoder launch.
  m.def(
      "_embed_images",
      [](const PySam& s, const std::vector<ImageIn>& images, int batch) {
        if (batch < 1) throw vitrt::InvalidArgument("batch_size must be at least 1, got " + std::to_string(batch));
        const std::vector<vitrt::Image> ims = images_from(images);
        std::vector<PyEmbedding> out;
        out.reserve(ims.size());
        nb::gil_scoped_release release;
        for (size_t first = 0; first < ims.size(); first += batch) {
          const size_t count = std::min<size_t>(batch, ims.size() - first);
          const auto part = std::span<const vitrt::Image>(ims).subspan(first, count);
          for (vitrt::ImageEmbedding& e : vitrt::embed_images(*s.model, part)) out.push_back({std::move(e)});
        }
        return out;
      },
      "sam"_a, "images"_a, "batch"_a);
  m.def(
      "_load_embedding",
      [](const std::string& path) {
        nb::gil_scoped_release release;
        return PyEmbedding{vitrt::load_embedding(path)};
      },
      "path"_a);

  nb::class_<PyPredictor>(m, "_Predictor")
      .def(nb::init<const PySam&>(), "model"_a)
      .def("set_image", &PyPredictor::set_image, "image"_a)
      .def("set_embedding", &PyPredictor::set_embedding, "embedding"_a)
      .def("reset_image", &PyPredictor::reset_image)
      .def_prop_ro("is_image_set", &PyPredictor::is_image_set)
      .def_prop_ro("original_size", &PyPredictor::original_size)
      .def_prop_ro("input_size", &PyPredictor::input_size)
      .def("get_image_embedding", &PyPredictor::get_image_embedding)
      .def("predict", &PyPredictor::predict, "point_coords"_a.none(), "point_labels"_a.none(), "box"_a.none(),
           "mask_input"_a.none(), "multimask_output"_a, "return_logits"_a);

#if VITRT_PY_WITH_AMG
  nb::class_<PyMaskGenerator>(m, "_MaskGenerator")
      .def(nb::init<const PySam&, std::optional<int>, int, double, double, double, double, int, double, double, int,
                    std::optional<std::vector<std::vector<std::vector<double>>>>, int, const std::string&>(),
           "model"_a, "points_per_side"_a.none(), "points_per_batch"_a, "pred_iou_thresh"_a,
           "stability_score_thresh"_a, "stability_score_offset"_a, "box_nms_thresh"_a, "crop_n_layers"_a,
           "crop_nms_thresh"_a, "crop_overlap_ratio"_a, "crop_n_points_downscale_factor"_a, "point_grids"_a.none(),
           "min_mask_region_area"_a, "output_mode"_a)
      .def("generate", &PyMaskGenerator::generate, "image"_a);
  m.attr("HAVE_AMG") = true;
#else
  m.attr("HAVE_AMG") = false;
#endif
}
