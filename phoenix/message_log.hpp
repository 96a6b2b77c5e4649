// message_log.hpp — the file ph_finalize writes undelivered messages to and ph_initialize reads them from
// (paper, section 3.3: temporary leave).
//
// Layout, integers little-endian: the 8 bytes "PHXLOG01", then one record per message
//   u64 dest, u64 source, u32 tag, u32 reserved (0), u64 length, length bytes of body
// and a trailer: the 8 bytes "PHXEND01" and a u64 record count. A file without its trailer (a crash while
// writing) is rejected rather than half-read; writing goes to a temporary file renamed into place.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "overlay/packet.hpp"

namespace phoenix {

// "" on success, else a one-line error naming the file.
std::string write_message_log(const std::filesystem::path& file, const std::vector<overlay::packet>& packets);
std::string read_message_log(const std::filesystem::path& file, std::vector<overlay::packet>& out);

}  // namespace phoenix
