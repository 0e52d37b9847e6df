// The image arguments of the bulk commands (`everything`, `embed`): a file, a directory or a list.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace vitrt::cli {

// .png / .jpg / .jpeg, any case.
bool is_image_name(const std::filesystem::path& p);

// IMG, DIR (its PNG/JPEG files, sorted) or LIST.txt (one path per line; relative paths are taken
// relative to the list's folder; blank lines and lines starting with # are skipped).
std::vector<std::string> collect_images(const std::string& arg);

}  // namespace vitrt::cli
