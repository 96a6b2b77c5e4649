// key_file.hpp — a fresh random cluster key for a local cluster (demo, tests, benchmarks).
#pragma once

#include <filesystem>

namespace phoenix::launch {

// Writes 48 random characters and a newline to `file` with mode 600 and returns the path as a string.
// Throws std::runtime_error when the file cannot be written.
std::string write_cluster_key(const std::filesystem::path& file);

}  // namespace phoenix::launch
