#include "apps/launch/key_file.hpp"

#include <openssl/rand.h>

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

}  // namespace phoenix::launch
