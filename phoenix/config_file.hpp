// config_file.hpp — reading a file a user names (a configuration) within bounds, before any parser sees it.
//
// A configuration is small and shallow. A path to the wrong thing (/dev/zero, a FIFO, a multi-gigabyte log) must
// fail fast instead of reading without end, and text nested thousands deep must fail before toml11, which
// recurses once per level, overflows the stack on it. Pure functions besides the one read; any thread.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace phoenix {

constexpr std::size_t max_config_file_bytes = std::size_t{1} << 20;
constexpr std::size_t max_config_depth = 32;

// Reads at most max_bytes + 1 bytes of `file` into `out`: "" on success, else an error naming the file and,
// for a file that is too large, the limit.
std::string read_bounded_file(const std::filesystem::path& file, std::size_t max_bytes, std::string& out);

// The deepest nesting in TOML text: arrays and inline tables inside each other, plus the parts of a dotted key
// (each is a table level). Strings and comments are skipped; the text need not be valid TOML.
struct toml_depth {
  std::size_t depth = 0;
  std::size_t line = 0;  // 1-based line where `depth` was first reached
  // Where each empty array value opens and closes ('[' and ']'; whitespace and comments between).
  std::vector<std::pair<std::size_t, std::size_t>> empty_arrays;
};
toml_depth measure_toml_depth(std::string_view text);

// "" when the scanned text nests at most max_depth deep, else "FILE:LINE: ..." naming the limit.
std::string check_toml_depth(const toml_depth& scanned, std::size_t max_depth, const std::string& file);

// toml11 3.7 dereferences the first element of an empty array when a dotted key or a table header goes on
// through the key that holds it (`a = []` then `[a.b]`), and crashes. So each empty array value is parsed as an
// array holding one table with the key `empty_array_marker`, which a header can go through, and
// restore_empty_arrays (config_toml.hpp) empties it again after parsing. Lines keep their numbers: the newlines
// an empty array spanned follow it.
inline constexpr std::string_view empty_array_marker = "\x01phoenix: an empty array";
std::string mark_empty_arrays(std::string_view text, const toml_depth& scanned);

}  // namespace phoenix
