// overlay/links/cluster_key.cpp — see cluster_key.hpp.
#include "overlay/links/cluster_key.hpp"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <span>
#include <string>
#include <string_view>
#include <system_error>

namespace phoenix::overlay {
namespace {

// std::error_code::message() is strerror's text without strerror's shared static buffer.
std::string errno_text(int err) { return std::error_code(err, std::generic_category()).message(); }

std::string quoted(const std::filesystem::path& path) { return "'" + path.string() + "'"; }

std::string how_to_make(const std::filesystem::path& path) {
  return "; make one with: head -c 32 /dev/urandom | base64 > " + path.string() + " && chmod 600 " +
         path.string();
}

// Closes the descriptor on every path out of load_cluster_key().
class fd_closer {
 public:
  explicit fd_closer(int fd) : fd_(fd) {}
  ~fd_closer() { ::close(fd_); }
  fd_closer(const fd_closer&) = delete;
  fd_closer& operator=(const fd_closer&) = delete;

 private:
  int fd_;
};

// Like OpenSSH's check on private key files (sshkey.c, sshkey_perm_ok(): st_mode & 077), any permission for
// group or others is too open: readable leaks the key, writable lets someone replace it.
std::string permission_warning(const std::filesystem::path& path, const struct stat& st) {
  if (!S_ISREG(st.st_mode) || (st.st_mode & 077) == 0) return {};
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
  return "UNPROTECTED CLUSTER KEY FILE: permissions " + std::string(mode) + " for " + quoted(path) +
         " are too open; anyone who can read it can join the cluster. Run: chmod 600 " + path.string();
}

// Reads up to max_cluster_key_file_bytes + 1 bytes (one more than allowed, to detect an oversized file).
// Returns errno on a read error, 0 on success.
int read_all(int fd, std::vector<std::byte>& buf, std::size_t& size) {
  buf.assign(max_cluster_key_file_bytes + 1, std::byte{0});
  size = 0;
  while (size < buf.size()) {
    const ssize_t n = ::read(fd, buf.data() + size, buf.size() - size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) break;
    size += static_cast<std::size_t>(n);
  }
  return 0;
}

std::size_t without_trailing_newline(const std::vector<std::byte>& buf, std::size_t size) {
  if (size >= 1 && buf[size - 1] == std::byte{'\n'}) {
    --size;
    if (size >= 1 && buf[size - 1] == std::byte{'\r'}) --size;
  }
  return size;
}

}  // namespace

key_result load_cluster_key(const std::filesystem::path& path) {
  key_result result;
  // One descriptor for both fstat and read, so the permissions checked are those of the file read.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    result.error = "cannot open cluster key file " + quoted(path) + ": " + errno_text(err);
    if (err == ENOENT) result.error += how_to_make(path);
    return result;
  }
  fd_closer closer(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    result.error = "cannot stat cluster key file " + quoted(path) + ": " + errno_text(errno);
    return result;
  }
  std::vector<std::byte> buf;
  std::size_t size = 0;
  if (const int err = read_all(fd, buf, size); err != 0) {
    result.error = "cannot read cluster key file " + quoted(path) + ": " + errno_text(err);
  } else if (size > max_cluster_key_file_bytes) {
    result.error = "cluster key file " + quoted(path) + " is larger than " +
                   std::to_string(max_cluster_key_file_bytes) + " bytes; is it the right file?";
  } else if (const std::size_t key_size = without_trailing_newline(buf, size);
             key_size < min_cluster_key_bytes) {
    result.error = "cluster key file " + quoted(path) + " holds " + std::to_string(key_size) +
                   " bytes of key, need at least " + std::to_string(min_cluster_key_bytes) + how_to_make(path);
  } else {
    result.key.assign(buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(key_size));
    result.warning = permission_warning(path, st);
  }
  OPENSSL_cleanse(buf.data(), buf.size());  // the key now lives only in result.key
  return result;
}

std::vector<std::byte> development_key() {
  // Public by design (it is in the source): links made with it are authenticated against nothing.
  constexpr std::string_view text = "phoenix-development-cluster-key-INSECURE-do-not-use-in-production";
  const auto bytes = std::as_bytes(std::span(text));
  return {bytes.begin(), bytes.end()};
}

}  // namespace phoenix::overlay
