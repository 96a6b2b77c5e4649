// errors.cpp — the PH_E* codes, their texts, and their std::error_category for the C++ face.
#include <string>

#include <phoenix/node.hpp>

namespace phoenix {

namespace {

class phoenix_category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "phoenix"; }
  std::string message(int code) const override { return ph_strerror(code); }
};

}  // namespace

// Never destroyed: a process that exits while a node's threads still run (exit() after an error, without
// finalize) must not leave them comparing error codes against a destroyed category.
const std::error_category& error_category() {
  static const auto* instance = new phoenix_category;
  return *instance;
}

std::error_code make_error_code(int ph_code) { return {ph_code, error_category()}; }

}  // namespace phoenix

extern "C" const char* ph_strerror(int code) {
  switch (code) {
    case PH_OK: return "success";
    case PH_EINVAL: return "invalid argument";
    case PH_ESTATE: return "not allowed in this state (is the node initialized?)";
    case PH_EAGAIN: return "too many messages waiting for a route: try again later";
    case PH_ETOOBIG: return "message larger than max_message_bytes";
    case PH_EADDR: return "bad address, or cannot bind or resolve it";
    case PH_EOVERLAP: return "this node already assumes part of that interval";
    case PH_ENOTASSUMED: return "this node does not assume all of that interval";
    case PH_ECONFIG: return "invalid configuration";
    case PH_EIO: return "cannot read or write a file";
    case PH_ETIMEDOUT: return "timed out";
    case PH_EKEY: return "cluster key file missing or unreadable";
    case PH_ENOTSUP: return "not supported by this build";
    case PH_EBUSY: return "the migration attempt ended without moving anything: try again";
    case PH_EUNREACH: return "no route to that node";
    case PH_ELOST: return "the dataspace's read log no longer holds this replica's answer";
    default: return code > 0 ? "success (a count)" : "unknown error";
  }
}
