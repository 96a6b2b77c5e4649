#include "phoenix/config_number.hpp"

#include <algorithm>
#include <array>
#include <utility>

namespace phoenix {
namespace {

bool mul_overflows(std::uint64_t a, std::uint64_t b, std::uint64_t& out) {
  return __builtin_mul_overflow(a, b, &out);
}

}  // namespace

std::string parse_digits(std::string_view text, std::uint64_t& out) {
  if (text.empty()) return "expected digits";
  std::uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return "expected digits";
    if (mul_overflows(v, 10, v) || __builtin_add_overflow(v, static_cast<std::uint64_t>(c - '0'), &v))
      return "too large (max 18446744073709551615)";
  }
  out = v;
  return "";
}

std::string parse_number(std::string_view text, NumberKind kind, std::uint64_t& out) {
  const std::string shown = "\"" + std::string(text) + "\"";
  const std::string expected = kind == NumberKind::size
                                   ? "is not a size (examples: 1048576, \"256MiB\", \"8KiB\", \"2^62\")"
                                   : "is not a non-negative integer";
  if (kind == NumberKind::plain) {
    std::string err = parse_digits(text, out);
    if (err.empty()) return "";
    return shown + (err == "expected digits" ? " " + expected : " is " + err);
  }
  if (auto caret = text.find('^'); caret != std::string_view::npos) {
    std::uint64_t base = 0, exponent = 0;
    if (!parse_digits(text.substr(0, caret), base).empty() ||
        !parse_digits(text.substr(caret + 1), exponent).empty())
      return shown + " " + expected;
    std::uint64_t v = 1;
    for (std::uint64_t i = 0; i < exponent; ++i) {
      if (mul_overflows(v, base, v)) return shown + " is too large (max 2^64-1)";
      if (v == 0 || v == 1) break;  // 0^n and 1^n: no need to loop up to a huge exponent
    }
    out = v;
    return "";
  }
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  std::string_view suffix = text.substr(digits);
  while (!suffix.empty() && suffix.front() == ' ') suffix.remove_prefix(1);  // "256 MiB" reads fine too
  std::uint64_t unit = 1;
  if (!suffix.empty()) {
    // Binary (IEC) suffixes only: "MB" is ambiguous between 10^6 and 2^20, and a silent factor of 1.05 in a
    // memory bound is exactly the kind of mistake strict parsing is for.
    static constexpr std::array<std::pair<std::string_view, unsigned>, 7> kSuffixes = {
        {{"B", 0}, {"KiB", 10}, {"MiB", 20}, {"GiB", 30}, {"TiB", 40}, {"PiB", 50}, {"EiB", 60}}};
    auto it =
        std::find_if(kSuffixes.begin(), kSuffixes.end(), [&](const auto& s) { return s.first == suffix; });
    if (it == kSuffixes.end() || digits == 0)
      return shown + " " + expected + (digits > 0 ? "; suffixes are B, KiB, MiB, GiB, TiB, PiB, EiB" : "");
    unit = std::uint64_t{1} << it->second;
  }
  std::uint64_t v = 0;
  std::string err = parse_digits(text.substr(0, digits), v);
  if (!err.empty()) return shown + (err == "expected digits" ? " " + expected : " is " + err);
  if (mul_overflows(v, unit, v)) return shown + " is too large (max 2^64-1)";
  out = v;
  return "";
}

std::string check_share(Share s) {
  if (s.count == 0) return "a share [i, n] needs n >= 1";
  if (s.index >= s.count)
    return "a share [i, n] needs i < n, i counting from 0 (got [" + std::to_string(s.index) + ", " +
           std::to_string(s.count) + "])";
  return "";
}

std::string parse_share_text(std::string_view text, Share& out) {
  const auto slash = text.find('/');
  Share s;
  if (slash == std::string_view::npos || !parse_digits(text.substr(0, slash), s.index).empty() ||
      !parse_digits(text.substr(slash + 1), s.count).empty())
    return "\"" + std::string(text) + "\" is not of the form \"i/n\" (e.g. \"0/3\")";
  if (std::string err = check_share(s); !err.empty()) return err;
  out = s;
  return "";
}

}  // namespace phoenix
