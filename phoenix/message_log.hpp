// message_log.hpp — the file ph_finalize writes undelivered messages to and ph_initialize reads them from
// (paper, section 3.3: temporary leave), and ph_suspend the intervals it assumed with their application state.
//
// Layout, integers little-endian: the 8 bytes "PHXLOG04"; u64 n and n records u64 lo, u64 hi, u64 length,
// length bytes of state (the intervals a suspend packed; none for ph_finalize); u64 m and m records u64 source,
// u64 vnode, u64 last (the end-to-end streams to this node's virtual nodes: overlay/delivery/); u64 k and k
// records u64 owner, u64 lo, u64 hi, u64 kind (logged_loss: kind 1, an interval lost on its way to a taker that
// crashed, which the writer alone knew of; kind 0, what that taker held besides, is read and skipped: others saw
// the taker go and may have adopted it since); then one record per message
//   u64 dest, u64 source, u32 tag, u32 flags, u64 stream_seq, u64 stream_prev, u64 length, length bytes of body
// (flags: the packet's, and 0x100 for one its writer numbered and kept until its owner acknowledged it)
// and a trailer: the 8 bytes "PHXEND01" and a u64 record count. A file without its trailer (a crash while
// writing) is rejected rather than half-read; writing goes to a temporary file renamed into place. Logs of
// earlier versions ("PHXLOG01": messages of u64 dest, u64 source, u32 tag, u32 0, u64 length, body;
// "PHXLOG02": intervals first; "PHXLOG03": no losses) are read too.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <phoenix/node.hpp>

#include "overlay/delivery/receive_streams.hpp"
#include "overlay/packet.hpp"

namespace phoenix {

// An interval a suspended node assumed, with the application state pack gave for it.
struct suspended_interval {
  Interval span;
  Bytes state;
};

// What the writer alone knew of an owner that crashed: an interval it gave that owner before anyone heard the
// owner assume it. The next incarnation reports it orphaned and adopts it by the rules of
// phoenix/orphan_adoption.hpp (phoenix/node_losses.cpp).
struct logged_loss {
  vp_t owner = 0;
  Interval span;
  friend bool operator==(const logged_loss&, const logged_loss&) = default;
};
inline constexpr std::size_t max_logged_losses = 64;

// "" on success, else a one-line error naming the file.
std::string write_message_log(const std::filesystem::path& file, const std::vector<overlay::packet>& packets,
                              const std::vector<suspended_interval>& intervals = {},
                              const std::vector<overlay::stream_state>& streams = {},
                              const std::vector<logged_loss>& losses = {});
std::string read_message_log(const std::filesystem::path& file, std::vector<overlay::packet>& out,
                             std::vector<suspended_interval>* intervals = nullptr,
                             std::vector<overlay::stream_state>* streams = nullptr,
                             std::vector<logged_loss>* losses = nullptr);

// Removes the records with the runtime's own tags, -3..-1 (control requests, migration steps, PH_ANY_TAG),
// and end-to-end acknowledgements, and returns how many. They were addressed to an incarnation that is gone, and a file is no channel for
// them: replayed from a log, a control or migration packet would act without its sender's authority. Service
// tags (at or below -4, e.g. Volpex) are messages to virtual nodes and stay.
std::size_t drop_runtime_records(std::vector<overlay::packet>& packets);

}  // namespace phoenix
