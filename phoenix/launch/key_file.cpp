#include "phoenix/launch/key_file.hpp"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>

#include <cstdio>
#include <memory>

#include <fstream>
#include <stdexcept>

namespace phoenix::launch {

std::string write_cluster_key(const std::filesystem::path& file) {
  static constexpr char alphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+/";
  unsigned char random[48];
  if (RAND_bytes(random, sizeof random) != 1) throw std::runtime_error("RAND_bytes failed");
  {
    std::ofstream out(file, std::ios::trunc);
    if (!out) throw std::runtime_error("cannot write " + file.string());
  }
  std::filesystem::permissions(file, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  std::ofstream out(file, std::ios::trunc);
  for (unsigned char r : random) out << alphabet[r % 64];
  out << "\n";
  if (!out) throw std::runtime_error("cannot write " + file.string());
  return file.string();
}

namespace {

using pkey_ptr = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;

// Creates `file` with `mode` before anything is written to it, then writes the private or public part of
// `key` to it as PEM.
void write_pem(const std::filesystem::path& file, std::filesystem::perms mode, EVP_PKEY* key, bool private_part) {
  {
    std::ofstream create(file, std::ios::trunc);
    if (!create) throw std::runtime_error("cannot write " + file.string());
  }
  std::filesystem::permissions(file, mode);
  std::unique_ptr<std::FILE, decltype(&std::fclose)> out(std::fopen(file.c_str(), "w"), std::fclose);
  const bool ok = out && (private_part
                              ? PEM_write_PrivateKey(out.get(), key, nullptr, nullptr, 0, nullptr, nullptr) == 1
                              : PEM_write_PUBKEY(out.get(), key) == 1);
  if (!ok || std::fflush(out.get()) != 0) throw std::runtime_error("cannot write " + file.string());
}

constexpr auto public_mode = std::filesystem::perms::owner_read | std::filesystem::perms::owner_write |
                             std::filesystem::perms::group_read | std::filesystem::perms::others_read;

}  // namespace

void write_controller_keys(const std::filesystem::path& private_file, const std::filesystem::path& public_file) {
  pkey_ptr key(EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519"), EVP_PKEY_free);
  if (!key) throw std::runtime_error("cannot make an Ed25519 key (EVP_PKEY_Q_keygen failed)");
  write_pem(private_file, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write, key.get(),
            true);
  write_pem(public_file, public_mode, key.get(), false);
}

void write_controller_public_key(const std::filesystem::path& private_file,
                                 const std::filesystem::path& public_file) {
  std::unique_ptr<std::FILE, decltype(&std::fclose)> in(std::fopen(private_file.c_str(), "r"), std::fclose);
  if (!in) throw std::runtime_error("cannot read controller key file " + private_file.string());
  pkey_ptr key(PEM_read_PrivateKey(in.get(), nullptr, nullptr, nullptr), EVP_PKEY_free);
  if (!key || EVP_PKEY_get_base_id(key.get()) != EVP_PKEY_ED25519)
    throw std::runtime_error("controller key file " + private_file.string() +
                             " holds no PEM Ed25519 private key; make one with: openssl genpkey -algorithm "
                             "ed25519 -out " + private_file.string());
  write_pem(public_file, public_mode, key.get(), false);
}

}  // namespace phoenix::launch
