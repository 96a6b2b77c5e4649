// key_file.hpp — a fresh random cluster key for a local cluster (demo, tests, benchmarks), and the controller's
// Ed25519 key pair that phsh signs kill, leave, suspend and log requests with (phoenix/controller_key.hpp).
#pragma once

#include <filesystem>
#include <string>

namespace phoenix::launch {

// Writes 48 random characters and a newline to `file` with mode 600 and returns the path as a string.
// Throws std::runtime_error when the file cannot be written.
std::string write_cluster_key(const std::filesystem::path& file);

// Writes a fresh Ed25519 key pair as PEM: the private key to `private_file` (mode 600), the public key to
// `public_file` (mode 644). Throws std::runtime_error when either cannot be written.
void write_controller_keys(const std::filesystem::path& private_file, const std::filesystem::path& public_file);

// Writes the public half of the PEM private key in `private_file` to `public_file`. Throws std::runtime_error
// naming the file when it holds no Ed25519 private key or the output cannot be written.
void write_controller_public_key(const std::filesystem::path& private_file,
                                 const std::filesystem::path& public_file);

}  // namespace phoenix::launch
