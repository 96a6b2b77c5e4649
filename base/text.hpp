// base/text.hpp — strict reading of numbers and fields in the line protocols (node lines, status replies).
#pragma once

#include <charconv>
#include <string_view>
#include <system_error>

namespace phoenix::base {

// The whole of `text` as a number (no sign, space or suffix); false, with `out` unspecified, otherwise.
template <typename T>
bool parse_number(std::string_view text, T& out) {
  if (text.empty()) return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

// `s` without leading blanks and without trailing blanks or carriage return.
inline std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

}  // namespace phoenix::base
