#include "cli/image_inputs.h"

#include <algorithm>
#include <cctype>
#include <fstream>

#include "vitrt/error.h"

namespace vitrt::cli {

namespace fs = std::filesystem;

bool is_image_name(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg";
}

std::vector<std::string> collect_images(const std::string& arg) {
  const fs::path p(arg);
  VITRT_CHECK(fs::exists(p), IoError, "--image '", arg, "' does not exist");
  std::vector<std::string> out;
  if (fs::is_directory(p)) {
    for (const auto& e : fs::directory_iterator(p))
      if (e.is_regular_file() && is_image_name(e.path())) out.push_back(e.path().string());
    std::sort(out.begin(), out.end());
    VITRT_CHECK(!out.empty(), InvalidArgument, "directory '", arg, "' holds no .png/.jpg/.jpeg images");
    return out;
  }
  if (p.extension() == ".txt") {
    std::ifstream in(p);
    VITRT_CHECK(in, IoError, "cannot read image list '", arg, "'");
    std::string line;
    while (std::getline(in, line)) {
      while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
      if (line.empty() || line[0] == '#') continue;
      fs::path q(line);
      if (q.is_relative()) q = p.parent_path() / q;
      out.push_back(q.string());
    }
    VITRT_CHECK(!out.empty(), InvalidArgument, "image list '", arg, "' names no images");
    return out;
  }
  return {arg};
}

}  // namespace vitrt::cli
