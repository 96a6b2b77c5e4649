// config_toml.hpp — configuration values out of toml11's values, and toml11's errors as one line.
//
// toml11 reports problems by throwing, with multi-line, ASCII-art messages, and keeps a table's keys unordered.
// These helpers read values with one-line errors ("file:line: key: problem") and give a table's keys in file
// order, because the errors end up in log lines and in ph_initialize's PH_ECONFIG diagnostics, and the first
// error reported should be the first in the file.
#pragma once

#include <cstdint>
#include <phoenix/config.hpp>  // Share, Interval
#include <span>
#include <string>
#include <string_view>
#include <toml.hpp>
#include <utility>
#include <vector>

#include "phoenix/config_number.hpp"

namespace phoenix {

// Where a value sits, "file:line: " (just "file: " without a line), from toml11's record of its source.
// `file` as given by the caller, so messages match what the user typed.
std::string where(const std::string& file, const toml::value& v);

// toml11's name of the value's type: "integer", "boolean", "floating", ...
std::string type_name(const toml::value& v);

// The keys of a table with their values, in the order they appear in the file.
std::vector<std::pair<std::string, const toml::value*>> entries_in_file_order(const toml::value& table);

// Empties again every array that mark_empty_arrays (config_file.hpp) filled with its marker. "" on success;
// an error where a dotted key or a table header went on through an empty array, as toml11 reports for any
// other array ("c.toml:2: a: ..."), or where the file itself wrote the marker (more than `marked` found).
std::string restore_empty_arrays(const std::string& file, toml::value& root, std::size_t marked);

// toml11's multi-line syntax error as one line: "FILE:LINE: TOML syntax error: HEADLINE (COMMENT)".
std::string one_line_syntax_error(const std::string& file, const toml::exception& e);

// An unsigned integer given as a TOML integer or as a string of the given kind, at most `max`: "" on success,
// else why not (without naming the key: callers do).
std::string read_number(const toml::value& v, NumberKind kind, std::uint64_t max, std::uint64_t& out);

// A string: "" on success, else why not.
std::string read_string(const toml::value& v, std::string& out);

// A share, [i, n] or "i/n": "" on success, else why not.
std::string read_share(const toml::value& v, Share& out);

// The value of key `name` (e.g. "node.a.peers") as an array of strings, or as [{lo = ..., hi = ...}, ...].
// "" on success, else an error that says where: at the element at fault when it is one, e.g.
// "c.toml:3: assume[1].hi: ...".
std::string read_strings(const std::string& file, const std::string& name, const toml::value& v,
                         std::vector<std::string>& out);
std::string read_intervals(const std::string& file, const std::string& name, const toml::value& v,
                           std::vector<Interval>& out);

// Why `key` is not one of `keys` (those its table may hold), suggesting the nearest one when it looks like a
// typo of it; with top_level false the table is a [node.NAME] table.
std::string unknown_key_message(std::string_view key, std::span<const std::string_view> keys, bool top_level);

}  // namespace phoenix
