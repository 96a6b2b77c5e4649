// ssh_known_hosts.cpp — an SSH gateway's host key against known_hosts, as OpenSSH checks it
// (ssh_known_hosts.hpp).
#include "overlay/transports/ssh_known_hosts.hpp"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "overlay/log.hpp"

namespace phoenix::overlay {

namespace {

std::string last_error(LIBSSH2_SESSION* session) {
  char* message = nullptr;
  int len = 0;
  const int rc = libssh2_session_last_error(session, &message, &len, 0);
  return (message && len > 0 ? std::string(message, static_cast<std::size_t>(len)) : std::string("error")) +
         " (" + std::to_string(rc) + ")";
}

// "SHA256:" and the unpadded base64 of the SHA-256 of the key blob, as OpenSSH prints it.
std::string fingerprint(const unsigned char* blob, std::size_t len) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int digest_len = 0;
  if (EVP_Digest(blob, len, digest, &digest_len, EVP_sha256(), nullptr) != 1) return "SHA256:?";
  std::string b64(4 * ((digest_len + 2) / 3) + 1, '\0');
  const int n =
      EVP_EncodeBlock(reinterpret_cast<unsigned char*>(b64.data()), digest, static_cast<int>(digest_len));
  b64.resize(static_cast<std::size_t>(n));
  while (!b64.empty() && b64.back() == '=') b64.pop_back();
  return "SHA256:" + b64;
}

// The fingerprint of a known_hosts entry's key (base64 of the blob).
std::string fingerprint_of_base64(const char* key) {
  const std::size_t len = std::strlen(key);
  std::vector<unsigned char> blob(3 * (len / 4) + 3);
  const int n =
      EVP_DecodeBlock(blob.data(), reinterpret_cast<const unsigned char*>(key), static_cast<int>(len));
  if (n < 0) return "SHA256:?";
  std::size_t size = static_cast<std::size_t>(n);
  for (std::size_t i = len; i > 0 && key[i - 1] == '='; --i) --size;  // EVP_DecodeBlock counts the padding
  return fingerprint(blob.data(), size);
}

int knownhost_key_type(int hostkey_type) {
  switch (hostkey_type) {
    case LIBSSH2_HOSTKEY_TYPE_RSA:
      return LIBSSH2_KNOWNHOST_KEY_SSHRSA;
    case LIBSSH2_HOSTKEY_TYPE_DSS:
      return LIBSSH2_KNOWNHOST_KEY_SSHDSS;
    case LIBSSH2_HOSTKEY_TYPE_ECDSA_256:
      return LIBSSH2_KNOWNHOST_KEY_ECDSA_256;
    case LIBSSH2_HOSTKEY_TYPE_ECDSA_384:
      return LIBSSH2_KNOWNHOST_KEY_ECDSA_384;
    case LIBSSH2_HOSTKEY_TYPE_ECDSA_521:
      return LIBSSH2_KNOWNHOST_KEY_ECDSA_521;
    case LIBSSH2_HOSTKEY_TYPE_ED25519:
      return LIBSSH2_KNOWNHOST_KEY_ED25519;
    default:
      return 0;
  }
}

// Owns a LIBSSH2_KNOWNHOSTS.
struct known_hosts {
  LIBSSH2_KNOWNHOSTS* h;
  explicit known_hosts(LIBSSH2_SESSION* s) : h(libssh2_knownhost_init(s)) {}
  ~known_hosts() {
    if (h) libssh2_knownhost_free(h);
  }
  known_hosts(const known_hosts&) = delete;
  known_hosts& operator=(const known_hosts&) = delete;
};

// Reads the file line by line: libssh2_knownhost_readfile stops at the first line it cannot parse (a
// @cert-authority marker, a key type it does not know), which would hide every entry after it.
void read_known_hosts(LIBSSH2_KNOWNHOSTS* hosts, const std::string& path) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    libssh2_knownhost_readline(hosts, line.c_str(), line.size(), LIBSSH2_KNOWNHOST_FILE_OPENSSH);
  }
}

// Appends one line (as OpenSSH's accept-new does), creating the file (and ~/.ssh) if needed.
std::string append_line(const std::string& path, std::string line) {
  std::error_code ec;
  const auto dir = std::filesystem::path(path).parent_path();
  if (!dir.empty() && !std::filesystem::exists(dir, ec)) {
    std::filesystem::create_directories(dir, ec);
    ::chmod(dir.c_str(), 0700);
  }
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) return std::strerror(errno);
  // Start on a line of our own if the file does not end with a newline.
  char last = '\n';
  if (const off_t end = ::lseek(fd, 0, SEEK_END);
      end > 0 && ::pread(fd, &last, 1, end - 1) == 1 && last != '\n')
    line.insert(line.begin(), '\n');
  std::string error;
  if (::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) error = std::strerror(errno);
  ::close(fd);
  return error;
}

}  // namespace

std::string check_gateway_host_key(LIBSSH2_SESSION* session, const std::string& host, const std::string& file,
                                   bool accept_new, const std::string& log_name) {
  std::size_t len = 0;
  int type = 0;
  const char* key = libssh2_session_hostkey(session, &len, &type);
  if (!key) return "SSH gateway " + host + " sent no host key";
  const int key_type = knownhost_key_type(type);
  const std::string presented = fingerprint(reinterpret_cast<const unsigned char*>(key), len);

  known_hosts hosts(session);
  if (!hosts.h) return "cannot check the host key of " + host + ": " + last_error(session);
  read_known_hosts(hosts.h, file);
  libssh2_knownhost* entry = nullptr;
  const int plain = LIBSSH2_KNOWNHOST_TYPE_PLAIN | LIBSSH2_KNOWNHOST_KEYENC_RAW;
  int result = libssh2_knownhost_check(hosts.h, host.c_str(), key, len, plain | key_type, &entry);
  if (result == LIBSSH2_KNOWNHOST_CHECK_NOTFOUND) {
    // A key of another type known for this host counts as a change, not as a new host: accept-new must not
    // let a gateway that switched key types through.
    libssh2_knownhost* other = nullptr;
    if (libssh2_knownhost_check(hosts.h, host.c_str(), key, len, plain, &other) ==
        LIBSSH2_KNOWNHOST_CHECK_MISMATCH) {
      result = LIBSSH2_KNOWNHOST_CHECK_MISMATCH;
      entry = other;
    }
  }
  switch (result) {
    case LIBSSH2_KNOWNHOST_CHECK_MATCH:
      logger()->debug("{}: host key of {} matches {} ({})", log_name, host, file, presented);
      return "";
    case LIBSSH2_KNOWNHOST_CHECK_MISMATCH:
      return "host key of SSH gateway " + host + " CHANGED: it presents " + presented + " but " + file +
             " has " + (entry && entry->key ? fingerprint_of_base64(entry->key) : std::string("another key")) +
             "; refused (possible man-in-the-middle; if the gateway's key really changed, remove the old "
             "entry)";
    case LIBSSH2_KNOWNHOST_CHECK_NOTFOUND:
      break;
    default:
      return "cannot check the host key of " + host + " against " + file + ": " + last_error(session);
  }
  if (!accept_new)
    return "host key of SSH gateway " + host + " (" + presented + ") is not in " + file +
           "; refused (ssh_host_key_policy is strict: add it, e.g. with ssh-keyscan, or use accept-new)";
  libssh2_knownhost* added = nullptr;
  if (libssh2_knownhost_addc(hosts.h, host.c_str(), nullptr, key, len, nullptr, 0, plain | key_type, &added) !=
      0)
    return "cannot record the host key of " + host + ": " + last_error(session);
  char line[8192];
  std::size_t line_len = 0;
  if (libssh2_knownhost_writeline(hosts.h, added, line, sizeof line, &line_len,
                                  LIBSSH2_KNOWNHOST_FILE_OPENSSH) != 0)
    return "cannot record the host key of " + host + ": " + last_error(session);
  if (auto err = append_line(file, std::string(line, line_len)); !err.empty())
    return "cannot record the host key of " + host + " in " + file + ": " + err;
  logger()->warn("{}: permanently added the host key of {} ({}) to {}", log_name, host, presented, file);
  return "";
}

}  // namespace phoenix::overlay
