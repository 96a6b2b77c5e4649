// overlay/links/cluster_key.hpp — the shared secret every node of a cluster uses to authenticate its links.
//
// Contract:
//  * load_cluster_key() reads the whole file; the key is the file's bytes (not decoded: a base64 line from
//    `head -c 32 /dev/urandom | base64` is 44 bytes of key with 256 bits of entropy), minus one trailing "\n"
//    or "\r\n" so that editors and `echo` do not change the key.
//  * Failures are values: on failure `error` says what is wrong with which path and how to fix it, and `key` is
//    empty. On success `error` is empty; `warning` is non-empty when the file is accessible to group or others
//    (the caller logs it; the key is still used, unlike OpenSSH which refuses such private keys).
//  * Files over max_cluster_key_file_bytes are refused, so pointing at the wrong file (or a device) fails fast.
//  * development_key() is a fixed, public key for running without a key file; it authenticates nothing and the
//    caller must warn when it is used.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

namespace phoenix::overlay {

inline constexpr std::size_t min_cluster_key_bytes = 16;
inline constexpr std::size_t max_cluster_key_file_bytes = 64 * 1024;

struct key_result {
  std::vector<std::byte> key;
  std::string error;    // empty on success
  std::string warning;  // e.g. permissions too open; empty if none
  bool is_ok() const { return error.empty(); }
};

key_result load_cluster_key(const std::filesystem::path& path);

std::vector<std::byte> development_key();

}  // namespace phoenix::overlay
