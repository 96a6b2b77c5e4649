// control_key_file.cpp — see control_key_file.hpp.
#include "phoenix/control_key_file.hpp"

#include <openssl/crypto.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <system_error>

namespace phoenix {
namespace {

constexpr std::size_t max_key_file_bytes = 64 * 1024;

std::string how_to_make(bool want_private) {
  return want_private ? "; phsh writes a fresh pair (controller.key, controller.pub) in its run directory, or "
                        "make one with: openssl genpkey -algorithm ed25519 -out controller.key"
                      : "; it is the controller's public key: phsh writes controller.pub in its run directory, "
                        "or derive it with: openssl pkey -in controller.key -pubout -out controller.pub";
}

// Any permission for group or others on a private key is too open (as OpenSSH's sshkey_perm_ok()).
std::string permission_warning(const std::filesystem::path& file, const struct stat& st) {
  if (!S_ISREG(st.st_mode) || (st.st_mode & 077) == 0) return {};
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
  return "UNPROTECTED CONTROLLER KEY FILE: permissions " + std::string(mode) + " for '" + file.string() +
         "' are too open; whoever reads it can kill every node. Run: chmod 600 " + file.string();
}

}  // namespace

controller_key_result load_controller_key(const std::filesystem::path& file, bool want_private) {
  controller_key_result r;
  const std::string what = want_private ? "controller private key file '" : "controller public key file '";
  std::FILE* f = std::fopen(file.c_str(), "rbe");
  if (!f) {
    const int err = errno;
    r.error = "cannot open " + what + file.string() + "': " + std::generic_category().message(err) +
              (err == ENOENT ? how_to_make(want_private) : "");
    return r;
  }
  struct stat st {};
  const bool stat_ok = ::fstat(::fileno(f), &st) == 0;
  std::string text(max_key_file_bytes + 1, '\0');
  const std::size_t n = std::fread(text.data(), 1, text.size(), f);
  const bool read_error = std::ferror(f) != 0;
  std::fclose(f);
  text.resize(n);
  if (!stat_ok || read_error) {
    r.error = "cannot read " + what + file.string() + "'";
  } else if (n > max_key_file_bytes) {
    r.error = what + file.string() + "' is larger than 64 KiB; is it the right file?";
  } else {
    std::string why;
    r.key = controller_key::from_pem(text, want_private, &why);
    if (r.key.empty())
      r.error = what + file.string() + "': " + why + how_to_make(want_private);
    else if (want_private)
      r.warning = permission_warning(file, st);
  }
  OPENSSL_cleanse(text.data(), text.size());
  return r;
}

}  // namespace phoenix
