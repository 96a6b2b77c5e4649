// A temporary directory removed at the end of the test, and a cluster key file in it. PHOENIX_TEST_KEEP=1 in
// the environment keeps it (and says where) for a look at the nodes' logs.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>

#include "phoenix/launch/key_file.hpp"

namespace phoenix::test {

class temp_dir {
 public:
  temp_dir() {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() /
            ("phoenix-test-" + std::to_string(::getpid()) + "-" + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~temp_dir() {
    if (const char* keep = std::getenv("PHOENIX_TEST_KEEP"); keep && std::string(keep) == "1") {
      std::fprintf(stderr, "kept %s\n", path_.c_str());
      return;
    }
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

  // A file `name` holding `content`, with exactly `mode` (the umask does not decide it).
  std::filesystem::path write(const std::string& name, std::string_view content, mode_t mode = 0600) const {
    const auto file = path_ / name;
    {
      std::ofstream out(file, std::ios::binary);
      out.write(content.data(), static_cast<std::streamsize>(content.size()));
    }
    if (::chmod(file.c_str(), mode) != 0) throw std::runtime_error("chmod failed on " + file.string());
    return file;
  }

  // A fresh random cluster key, mode 600.
  std::string make_key(const std::string& name = "cluster.key") const {
    return launch::write_cluster_key(path_ / name);
  }

  // A fresh controller key pair: the private key (a controller's controller_key_file) and the public key (a
  // node's control_key_file).
  struct controller_keys {
    std::string private_file, public_file;
  };
  controller_keys make_controller_keys(const std::string& stem = "controller") const {
    controller_keys k{(path_ / (stem + ".key")).string(), (path_ / (stem + ".pub")).string()};
    launch::write_controller_keys(k.private_file, k.public_file);
    return k;
  }

 private:
  std::filesystem::path path_;
};

}  // namespace phoenix::test
