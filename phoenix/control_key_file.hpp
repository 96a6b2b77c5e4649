// control_key_file.hpp — reads the controller's key from a PEM file: the public key a node checks requests
// with (control_key_file), or the private key a controller signs them with (controller_key_file).
//
// Like the cluster key (overlay/links/cluster_key.hpp): files over 64 KiB are refused; failures are values whose
// text names the file and the fix; a private key file that group or others may access is used but warned
// about. Blocks on the file system; any thread.
#pragma once

#include <filesystem>
#include <string>

#include "phoenix/controller_key.hpp"

namespace phoenix {

struct controller_key_result {
  controller_key key;   // empty on error
  std::string error;    // empty on success
  std::string warning;  // e.g. a private key readable by others
};

controller_key_result load_controller_key(const std::filesystem::path& file, bool want_private);

}  // namespace phoenix
