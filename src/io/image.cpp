// PNG (libspng) and JPEG (libjpeg-turbo) decoding to RGB8, PNG encoding.
//
// The decoded pixels must be the ones Pillow produces, because the reference SAM pipeline opens
// images with PIL: JPEGs use libjpeg's default decoding (ISLOW IDCT, fancy upsampling), gray is
// replicated, palettes are expanded without applying tRNS, alpha is dropped without compositing
// and 16-bit samples keep their high byte. (For 16-bit gray Pillow clamps to 255 instead, a quirk
// not reproduced.) Sizes are checked from the header before any pixel buffer is allocated.
#include <spng.h>

#include <cerrno>
#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

// jpeglib.h needs size_t and FILE declared first.
#include <jerror.h>
#include <jpeglib.h>

#include "vitrt/error.h"
#include "vitrt/image.h"

namespace vitrt {
namespace {

void check_size(int64_t width, int64_t height, const ImageLimits& limits, const char* format) {
  VITRT_CHECK(width > 0 && height > 0, ImageError, format, " image has an empty size (", width,
              "x", height, ")");
  VITRT_CHECK(width * height <= limits.max_pixels, ImageError, format, " image is ", width, "x",
              height, " = ", width * height, " pixels, over the limit of ", limits.max_pixels,
              " (ImageLimits::max_pixels); refusing to decode it");
}

Image make_image(int width, int height) {
  Image image;
  image.width = width;
  image.height = height;
  image.channels = 3;
  image.pixels.resize(static_cast<size_t>(width) * height * 3);
  return image;
}

// ---- PNG ----------------------------------------------------------------------------------

Image decode_png(const uint8_t* data, size_t size, const ImageLimits& limits) {
  std::unique_ptr<spng_ctx, decltype(&spng_ctx_free)> ctx(spng_ctx_new(0), spng_ctx_free);
  VITRT_CHECK(ctx, ImageError, "PNG: cannot create a decoder");
  auto check = [](int rc, const char* step) {
    VITRT_CHECK(rc == 0, ImageError, "PNG: ", step, ": ", spng_strerror(rc));
  };
  // Ancillary chunks (text, ICC profiles) are not needed; cap what a hostile file can make
  // the decoder buffer.
  check(spng_set_chunk_limits(ctx.get(), 16u << 20, 64u << 20), "chunk limits");
  check(spng_set_png_buffer(ctx.get(), data, size), "input");
  spng_ihdr ihdr{};
  check(spng_get_ihdr(ctx.get(), &ihdr), "header");
  check_size(ihdr.width, ihdr.height, limits, "PNG");

  // SPNG_FMT_RGB8 expands gray and palette, drops alpha, reduces 16-bit samples to their high
  // byte; flags 0 leaves tRNS and gamma unapplied, as Pillow's convert("RGB") does.
  size_t out_size = 0;
  check(spng_decoded_image_size(ctx.get(), SPNG_FMT_RGB8, &out_size), "size");
  Image image = make_image(static_cast<int>(ihdr.width), static_cast<int>(ihdr.height));
  VITRT_CHECK(out_size == image.pixels.size(), ImageError, "PNG: unexpected decoded size");
  check(spng_decode_image(ctx.get(), image.pixels.data(), out_size, SPNG_FMT_RGB8, 0), "decode");
  return image;
}

// ---- JPEG ---------------------------------------------------------------------------------
// libjpeg reports fatal errors through error_exit, which must not return (the default calls
// exit()). Ours longjmps back to the step that called setjmp; those steps are plain C-style
// functions with no C++ objects in their frames, so no destructor is skipped, and their caller
// turns the failure into an ImageError.

struct JpegErrorManager {
  jpeg_error_mgr base;
  jpeg_progress_mgr progress;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

struct JpegState {
  jpeg_decompress_struct cinfo;
  JpegErrorManager err;
  bool created = false;
};

[[noreturn]] void jpeg_fail(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

// Warnings are ignored as Pillow ignores them, except running out of data: libjpeg would pad
// with gray and carry on, Pillow refuses a truncated file.
void jpeg_warn(j_common_ptr cinfo, int level) {
  if (level == -1 && cinfo->err->msg_code == JWRN_JPEG_EOF) {
    auto* err = reinterpret_cast<JpegErrorManager*>(cinfo->err);
    std::snprintf(err->message, sizeof(err->message), "truncated JPEG data");
    std::longjmp(err->jump, 1);
  }
}

// A progressive JPEG can hold thousands of tiny scans, each forcing a pass over the whole
// coefficient buffer; real files have about ten.
void jpeg_progress(j_common_ptr cinfo) {
  auto* d = reinterpret_cast<j_decompress_ptr>(cinfo);
  if (d->is_decompressor && d->input_scan_number > 1000) {
    auto* err = reinterpret_cast<JpegErrorManager*>(cinfo->err);
    std::snprintf(err->message, sizeof(err->message), "more than 1000 progressive scans");
    std::longjmp(err->jump, 1);
  }
}

bool jpeg_read_header_step(JpegState* s, const uint8_t* data, size_t size) {
  s->cinfo.err = jpeg_std_error(&s->err.base);
  s->err.base.error_exit = jpeg_fail;
  s->err.base.emit_message = jpeg_warn;
  s->err.message[0] = '\0';
  if (setjmp(s->err.jump)) return false;
  jpeg_create_decompress(&s->cinfo);
  s->created = true;
  s->err.progress = {};
  s->err.progress.progress_monitor = jpeg_progress;
  s->cinfo.progress = &s->err.progress;
  jpeg_mem_src(&s->cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(&s->cinfo, TRUE);
  return true;
}

bool jpeg_read_pixels_step(JpegState* s, uint8_t* out, size_t row_bytes) {
  if (setjmp(s->err.jump)) return false;
  jpeg_start_decompress(&s->cinfo);
  while (s->cinfo.output_scanline < s->cinfo.output_height) {
    JSAMPROW row = out + s->cinfo.output_scanline * row_bytes;
    jpeg_read_scanlines(&s->cinfo, &row, 1);
  }
  // jpeg_finish_decompress is skipped: it only reads up to EOI, and a file whose pixels are all
  // there but lacks the final marker is still usable.
  return true;
}

Image decode_jpeg(const uint8_t* data, size_t size, const ImageLimits& limits) {
  JpegState s{};
  struct Destroy {
    JpegState* s;
    ~Destroy() {
      if (s->created) jpeg_destroy_decompress(&s->cinfo);
    }
  } destroy{&s};
  VITRT_CHECK(jpeg_read_header_step(&s, data, size), ImageError, "JPEG: ", s.err.message);
  check_size(s.cinfo.image_width, s.cinfo.image_height, limits, "JPEG");

  // Decode in the colour space Pillow picks from the component count: L, RGB or CMYK.
  const J_COLOR_SPACE in_space = s.cinfo.jpeg_color_space;
  const bool cmyk = in_space == JCS_CMYK || in_space == JCS_YCCK;
  const bool gray = in_space == JCS_GRAYSCALE;
  s.cinfo.out_color_space = cmyk ? JCS_CMYK : gray ? JCS_GRAYSCALE : JCS_RGB;
  const int components = cmyk ? 4 : gray ? 1 : 3;

  Image image = make_image(static_cast<int>(s.cinfo.image_width),
                           static_cast<int>(s.cinfo.image_height));
  std::vector<uint8_t> raw;
  uint8_t* out = image.pixels.data();
  if (components != 3) {
    raw.resize(static_cast<size_t>(image.width) * image.height * components);
    out = raw.data();
  }
  VITRT_CHECK(jpeg_read_pixels_step(&s, out, static_cast<size_t>(image.width) * components),
              ImageError, "JPEG: ", s.err.message);
  VITRT_CHECK(static_cast<int>(s.cinfo.output_width) == image.width &&
                  static_cast<int>(s.cinfo.output_height) == image.height,
              ImageError, "JPEG: decoded size differs from the header");

  const size_t n = static_cast<size_t>(image.width) * image.height;
  uint8_t* rgb = image.pixels.data();
  if (gray) {
    for (size_t i = 0; i < n; ++i) rgb[3 * i] = rgb[3 * i + 1] = rgb[3 * i + 2] = raw[i];
  } else if (cmyk) {
    // Pillow assumes Adobe's inverted CMYK ("CMYK;I"), then converts each channel as
    // (255 - k) - (255 - k) * c / 255 with its rounded division by 255.
    for (size_t i = 0; i < n; ++i) {
      const uint8_t* p = &raw[4 * i];
      const int nk = p[3];  // stored inverted: 255 - k
      for (int c = 0; c < 3; ++c) {
        const int t = (255 - p[c]) * nk + 128;
        rgb[3 * i + c] = static_cast<uint8_t>(nk - (((t >> 8) + t) >> 8));
      }
    }
  }
  return image;
}

}  // namespace

Image decode_image(const uint8_t* data, size_t size, const ImageLimits& limits) {
  VITRT_CHECK(data != nullptr && size > 0, ImageError, "image data is empty (0 bytes)");
  static constexpr uint8_t kPngMagic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (size >= 8 && std::memcmp(data, kPngMagic, 8) == 0) return decode_png(data, size, limits);
  if (size >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF)
    return decode_jpeg(data, size, limits);
  throw ImageError("unrecognised image format: not a PNG or JPEG (checked the first bytes)");
}

Image read_image(const std::string& path, const ImageLimits& limits) {
  std::error_code ec;
  VITRT_CHECK(!std::filesystem::is_directory(path, ec), IoError, "cannot read image '", path,
              "': it is a directory");
  std::ifstream in(path, std::ios::binary);
  VITRT_CHECK(in, IoError, "cannot open image '", path, "': ", std::strerror(errno));
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
  VITRT_CHECK(!in.bad(), IoError, "cannot read image '", path, "': ", std::strerror(errno));
  try {
    return decode_image(bytes.data(), bytes.size(), limits);
  } catch (const ImageError& e) {
    throw ImageError(detail::concat("cannot decode image '", path, "': ", e.what()));
  }
}

std::vector<uint8_t> encode_png(const Image& image) {
  const int c = image.channels;
  VITRT_CHECK(c == 1 || c == 3 || c == 4, InvalidArgument, "encode_png: ", c,
              " channels (1, 3 or 4 supported)");
  VITRT_CHECK(!image.empty() && image.width > 0 && image.height > 0 &&
                  image.pixels.size() == static_cast<size_t>(image.width) * image.height * c,
              InvalidArgument, "encode_png: ", image.width, "x", image.height, "x", c,
              " image with ", image.pixels.size(), " bytes of pixels");
  std::unique_ptr<spng_ctx, decltype(&spng_ctx_free)> ctx(spng_ctx_new(SPNG_CTX_ENCODER),
                                                          spng_ctx_free);
  VITRT_CHECK(ctx, IoError, "PNG: cannot create an encoder");
  auto check = [](int rc, const char* step) {
    VITRT_CHECK(rc == 0, IoError, "PNG encode: ", step, ": ", spng_strerror(rc));
  };
  check(spng_set_option(ctx.get(), SPNG_ENCODE_TO_BUFFER, 1), "option");
  spng_ihdr ihdr{};
  ihdr.width = static_cast<uint32_t>(image.width);
  ihdr.height = static_cast<uint32_t>(image.height);
  ihdr.bit_depth = 8;
  ihdr.color_type = c == 1 ? SPNG_COLOR_TYPE_GRAYSCALE
                    : c == 3 ? SPNG_COLOR_TYPE_TRUECOLOR
                             : SPNG_COLOR_TYPE_TRUECOLOR_ALPHA;
  check(spng_set_ihdr(ctx.get(), &ihdr), "header");
  check(spng_encode_image(ctx.get(), image.pixels.data(), image.pixels.size(), SPNG_FMT_PNG,
                          SPNG_ENCODE_FINALIZE),
        "image");
  size_t len = 0;
  int rc = 0;
  std::unique_ptr<void, decltype(&std::free)> buf(spng_get_png_buffer(ctx.get(), &len, &rc),
                                                  std::free);
  check(buf ? rc : (rc ? rc : SPNG_EINTERNAL), "buffer");
  const auto* p = static_cast<const uint8_t*>(buf.get());
  return std::vector<uint8_t>(p, p + len);
}

void write_png(const std::string& path, const Image& image) {
  const std::vector<uint8_t> png = encode_png(image);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  VITRT_CHECK(out, IoError, "cannot create '", path, "': ", std::strerror(errno));
  out.write(reinterpret_cast<const char*>(png.data()), static_cast<std::streamsize>(png.size()));
  out.close();
  VITRT_CHECK(out, IoError, "cannot write '", path, "': ", std::strerror(errno));
}

}  // namespace vitrt
