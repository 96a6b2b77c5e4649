// config_number.hpp — the number syntax of configuration values, in files and in PHOENIX_* variables: sizes,
// counts, and shares "i/n".
//
// Sizes accept binary suffixes and powers because "268435456" and "4611686018427387904" are unreadable and easy
// to get wrong; counts and milliseconds accept digits only, where a suffix would be nonsense. Pure functions.
#pragma once

#include <cstdint>
#include <phoenix/config.hpp>  // Share
#include <string>
#include <string_view>

namespace phoenix {

enum class NumberKind { plain, size };

// Digits only: "" on success, else "expected digits" or "too large (max 18446744073709551615)".
std::string parse_digits(std::string_view text, std::uint64_t& out);

// "" on success, else why `text` is not a number of this kind (without naming the key: callers do).
std::string parse_number(std::string_view text, NumberKind kind, std::uint64_t& out);

// "" when `s` is a share of something, i.e. 0 <= index < count, else why not.
std::string check_share(Share s);

// "i/n": PHOENIX_SHARE's form, also accepted for the file's `share`. "" on success, else why not.
std::string parse_share_text(std::string_view text, Share& out);

}  // namespace phoenix
