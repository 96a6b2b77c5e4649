#include "phoenix/config_file.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <system_error>

namespace phoenix {

namespace fs = std::filesystem;

// fopen + fread of at most max_bytes + 1: a FIFO or character device yields what it has (or blocks like any
// read of it would), /dev/zero stops at the bound instead of filling memory.
std::string read_bounded_file(const fs::path& file, std::size_t max_bytes, std::string& out) {
  std::error_code ec;
  if (fs::is_directory(file, ec)) return file.string() + ": is a directory, not a configuration file";
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(file.c_str(), "rb"), &std::fclose);
  if (!f) return file.string() + ": cannot open: " + std::strerror(errno);
  std::string text;
  char buffer[8192];
  while (text.size() <= max_bytes) {
    const std::size_t want = std::min(sizeof buffer, max_bytes + 1 - text.size());
    const std::size_t n = std::fread(buffer, 1, want, f.get());
    if (n == 0) break;
    text.append(buffer, n);
  }
  if (std::ferror(f.get())) return file.string() + ": cannot read: " + std::strerror(errno);
  if (text.size() > max_bytes)
    return file.string() + ": larger than " + std::to_string(max_bytes) +
           " bytes, the limit for a configuration file; is it the right file?";
  out = std::move(text);
  return "";
}

namespace {

// Scanner state: which quoted string or comment we are in, if any.
enum class lexeme { plain, basic, literal, multi_basic, multi_literal, comment };

bool starts_with(std::string_view text, std::size_t i, std::string_view what) {
  return text.substr(i, what.size()) == what;
}

// A multi-line string ends with the last of up to five quotes in a row: one or two of them may belong to the
// string (TOML: """x"""" is x"). How many quotes the run at `i` has, at most five.
std::size_t closing_quotes(std::string_view text, std::size_t i, char quote) {
  std::size_t n = 0;
  while (n < 5 && i + n < text.size() && text[i + n] == quote) ++n;
  return n;
}

// For '[' at `open` in a value: where its ']' is if only whitespace and comments come between.
std::optional<std::size_t> empty_array_end(std::string_view text, std::size_t open) {
  for (std::size_t i = open + 1; i < text.size(); ++i) {
    const char c = text[i];
    if (c == ']') return i;
    if (c == '#') {
      while (i + 1 < text.size() && text[i + 1] != '\n') ++i;
    } else if (c != ' ' && c != '\t' && c != '\r' && c != '\n') {
      return std::nullopt;
    }
  }
  return std::nullopt;
}

}  // namespace

// A key is what precedes '=' on a line (or inside an inline table, after '{' or ','); dots there open tables.
// Dots in values (floats, dates) do not count. Table headers [a.b.c] count their dots too: not in a value.
toml_depth measure_toml_depth(std::string_view text) {
  toml_depth deepest;
  std::string open;  // the brackets open, innermost last: in '[' come values, in '{' keys after ','
  std::size_t key_dots = 0, line = 1;
  bool in_value = false;
  lexeme in = lexeme::plain;
  auto note = [&] {
    if (open.size() + key_dots > deepest.depth) deepest.depth = open.size() + key_dots, deepest.line = line;
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') {
      ++line;
      if (in == lexeme::comment || in == lexeme::basic || in == lexeme::literal) in = lexeme::plain;
      if (in == lexeme::plain && open.empty()) in_value = false, key_dots = 0;
      continue;
    }
    switch (in) {
      case lexeme::comment: continue;
      case lexeme::basic:
        if (c == '\\' && i + 1 < text.size() && text[i + 1] != '\n') ++i;
        else if (c == '"') in = lexeme::plain;
        continue;
      case lexeme::literal:
        if (c == '\'') in = lexeme::plain;
        continue;
      case lexeme::multi_basic:
        if (c == '\\' && i + 1 < text.size() && text[i + 1] != '\n') ++i;  // a newline still counts as a line
        else if (starts_with(text, i, "\"\"\"")) in = lexeme::plain, i += closing_quotes(text, i, '"') - 1;
        continue;
      case lexeme::multi_literal:
        if (starts_with(text, i, "'''")) in = lexeme::plain, i += closing_quotes(text, i, '\'') - 1;
        continue;
      case lexeme::plain: break;
    }
    switch (c) {
      case '#': in = lexeme::comment; break;
      case '"':
        if (starts_with(text, i, "\"\"\"")) in = lexeme::multi_basic, i += 2;
        else in = lexeme::basic;
        break;
      case '\'':
        if (starts_with(text, i, "'''")) in = lexeme::multi_literal, i += 2;
        else in = lexeme::literal;
        break;
      case '[':
      case '{':
        if (c == '[' && in_value) {
          if (const auto close = empty_array_end(text, i)) deepest.empty_arrays.emplace_back(i, *close);
        }
        open.push_back(c);
        if (c == '{') in_value = false, key_dots = 0;
        note();
        break;
      case ']':
      case '}':
        if (!open.empty()) open.pop_back();
        if (!open.empty()) in_value = true;
        break;
      case ',':
        if (!open.empty() && open.back() == '{') key_dots = 0, in_value = false;
        break;
      case '=': in_value = true; break;
      case '.':
        if (!in_value) ++key_dots, note();
        break;
      default: break;
    }
  }
  return deepest;
}

std::string check_toml_depth(const toml_depth& scanned, std::size_t max_depth, const std::string& file) {
  if (scanned.depth <= max_depth) return "";
  return file + ":" + std::to_string(scanned.line) + ": nested deeper than " + std::to_string(max_depth) +
         " levels (arrays, inline tables and dotted keys), the limit for a configuration file";
}

std::string mark_empty_arrays(std::string_view text, const toml_depth& scanned) {
  std::string out;
  out.reserve(text.size() + scanned.empty_arrays.size() * (empty_array_marker.size() + 16));
  std::size_t copied = 0;
  for (const auto& [open, close] : scanned.empty_arrays) {
    out.append(text.substr(copied, open - copied));
    // The marker's first character, U+0001, as TOML writes it in a basic string.
    out.append("[{\"\\u0001").append(empty_array_marker.substr(1)).append("\" = true}]");
    out.append(static_cast<std::size_t>(std::count(text.begin() + static_cast<std::ptrdiff_t>(open),
                                                   text.begin() + static_cast<std::ptrdiff_t>(close), '\n')),
               '\n');
    copied = close + 1;
  }
  out.append(text.substr(copied));
  return out;
}

}  // namespace phoenix
