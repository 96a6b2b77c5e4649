#include "phoenix/message_log.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "phoenix/service_messages.hpp"

#include "overlay/delivery/stream_codec.hpp"
#include "overlay/links/frame.hpp"

namespace phoenix {

namespace {

constexpr char magic_messages[9] = "PHXLOG01";  // earlier versions: messages only
constexpr char magic_with_state[9] = "PHXLOG02";  // earlier versions: intervals and their state first
constexpr char magic_with_streams[9] = "PHXLOG03";  // earlier versions: no losses
constexpr char magic[9] = "PHXLOG04";
constexpr char trailer[9] = "PHXEND01";
constexpr std::size_t old_record_head_bytes = 32;
constexpr std::size_t record_head_bytes = 48;
constexpr std::size_t stream_record_bytes = 24;
constexpr std::size_t loss_record_bytes = 32;
// A record's flags: the packet flags, and this bit for a packet its writer numbered and kept (a next incarnation
// keeps it again: overlay::forwarder::route_logged).
constexpr std::uint32_t kept_by_writer = 0x100;

std::string io_error(const std::filesystem::path& file, const char* what) {
  return std::string(what) + " " + file.string() + ": " + std::strerror(errno);
}

void write_u64(std::ofstream& out, std::uint64_t v) {
  std::byte b[8];
  base::store_le<std::uint64_t>(b, v);
  out.write(reinterpret_cast<const char*>(b), 8);
}

// fsync(2) on a file or directory: what a log holds, and its name, survive the machine's crash too.
bool sync_path(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::fsync(fd) == 0;
  const int saved = errno;
  ::close(fd);
  errno = saved;
  return ok;
}

}  // namespace

std::string write_message_log(const std::filesystem::path& file, const std::vector<overlay::packet>& packets,
                              const std::vector<suspended_interval>& intervals,
                              const std::vector<overlay::stream_state>& streams,
                              const std::vector<logged_loss>& losses) {
  auto tmp = file;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return io_error(tmp, "cannot create");
    out.write(magic, 8);
    write_u64(out, intervals.size());
    for (const auto& i : intervals) {
      write_u64(out, i.span.lo);
      write_u64(out, i.span.hi);
      write_u64(out, i.state.size());
      out.write(reinterpret_cast<const char*>(i.state.data()), static_cast<std::streamsize>(i.state.size()));
    }
    write_u64(out, streams.size());
    for (const auto& st : streams) {
      write_u64(out, st.source);
      write_u64(out, st.vnode);
      write_u64(out, st.last);
    }
    write_u64(out, losses.size());
    for (const auto& l : losses) {
      write_u64(out, l.owner);
      write_u64(out, l.span.lo);
      write_u64(out, l.span.hi);
      write_u64(out, 1);
    }
    std::byte head[record_head_bytes];
    for (const auto& p : packets) {
      base::store_le<std::uint64_t>(head, p.dest);
      base::store_le<std::uint64_t>(head + 8, p.source);
      base::store_le<std::uint32_t>(head + 16, static_cast<std::uint32_t>(p.tag));
      base::store_le<std::uint32_t>(head + 20, p.flags | (p.numbered_here ? kept_by_writer : 0u));
      base::store_le<std::uint64_t>(head + 24, p.stream_seq);
      base::store_le<std::uint64_t>(head + 32, p.stream_prev);
      base::store_le<std::uint64_t>(head + 40, p.body.size());
      out.write(reinterpret_cast<const char*>(head), record_head_bytes);
      out.write(reinterpret_cast<const char*>(p.body.data()), static_cast<std::streamsize>(p.body.size()));
    }
    out.write(trailer, 8);
    write_u64(out, packets.size());
    out.flush();
    if (!out) return io_error(tmp, "cannot write");
  }
  if (!sync_path(tmp)) return io_error(tmp, "cannot sync");
  std::error_code ec;
  std::filesystem::rename(tmp, file, ec);
  if (ec) return "cannot rename " + tmp.string() + " to " + file.string() + ": " + ec.message();
  const auto dir = file.has_parent_path() ? file.parent_path() : std::filesystem::path(".");
  if (!sync_path(dir)) return io_error(dir, "cannot sync directory");
  return "";
}

std::string read_message_log(const std::filesystem::path& file, std::vector<overlay::packet>& out,
                             std::vector<suspended_interval>* intervals,
                             std::vector<overlay::stream_state>* streams, std::vector<logged_loss>* losses) {
  // A FIFO or device would block or read without end, and file_size() below throws on them.
  std::error_code ec;
  if (std::filesystem::exists(file, ec) && !std::filesystem::is_regular_file(file, ec))
    return file.string() + ": not a regular file, so not a phoenix message log";
  std::ifstream in(file, std::ios::binary);
  if (!in) return io_error(file, "cannot open");
  char m[8];
  if (!in.read(m, 8)) return file.string() + ": not a phoenix message log";
  const bool with_losses = std::memcmp(m, magic, 8) == 0;
  const bool current = with_losses || std::memcmp(m, magic_with_streams, 8) == 0;  // the record layout
  const bool with_state = current || std::memcmp(m, magic_with_state, 8) == 0;
  if (!with_state && std::memcmp(m, magic_messages, 8) != 0) return file.string() + ": not a phoenix message log";
  const auto size = std::filesystem::file_size(file, ec);
  if (ec) return file.string() + ": cannot read its size: " + ec.message();
  std::vector<suspended_interval> states;
  std::byte head[record_head_bytes];
  if (with_state) {
    if (!in.read(reinterpret_cast<char*>(head), 8)) return file.string() + ": truncated state";
    const auto n = base::load_le<std::uint64_t>(head);
    if (n > size / 24) return file.string() + ": more intervals than the file holds";
    for (std::uint64_t k = 0; k < n; ++k) {
      if (!in.read(reinterpret_cast<char*>(head), 24)) return file.string() + ": truncated state";
      suspended_interval i;
      i.span = {base::load_le<std::uint64_t>(head), base::load_le<std::uint64_t>(head + 8)};
      const auto length = base::load_le<std::uint64_t>(head + 16);
      if (i.span.empty() || length > size) return file.string() + ": malformed state record";
      i.state.resize(length);
      if (!in.read(reinterpret_cast<char*>(i.state.data()), static_cast<std::streamsize>(length)))
        return file.string() + ": truncated state";
      states.push_back(std::move(i));
    }
  }
  std::vector<overlay::stream_state> delivered;
  if (current) {
    if (!in.read(reinterpret_cast<char*>(head), 8)) return file.string() + ": truncated streams";
    const auto n = base::load_le<std::uint64_t>(head);
    if (n > size / stream_record_bytes) return file.string() + ": more streams than the file holds";
    delivered.reserve(n);
    for (std::uint64_t k = 0; k < n; ++k) {
      if (!in.read(reinterpret_cast<char*>(head), stream_record_bytes)) return file.string() + ": truncated streams";
      delivered.push_back({base::load_le<std::uint64_t>(head), base::load_le<std::uint64_t>(head + 8),
                           base::load_le<std::uint64_t>(head + 16)});
    }
  }
  std::vector<logged_loss> lost;
  if (with_losses) {
    if (!in.read(reinterpret_cast<char*>(head), 8)) return file.string() + ": truncated losses";
    const auto n = base::load_le<std::uint64_t>(head);
    if (n > max_logged_losses) return file.string() + ": more lost intervals than a node keeps";
    for (std::uint64_t k = 0; k < n; ++k) {
      if (!in.read(reinterpret_cast<char*>(head), loss_record_bytes)) return file.string() + ": truncated losses";
      const auto kind = base::load_le<std::uint64_t>(head + 24);
      logged_loss l{base::load_le<std::uint64_t>(head),
                    {base::load_le<std::uint64_t>(head + 8), base::load_le<std::uint64_t>(head + 16)}};
      if (l.span.empty() || kind > 1) return file.string() + ": malformed lost interval";
      if (kind == 1) lost.push_back(l);
    }
  }
  const std::size_t head_bytes = current ? record_head_bytes : old_record_head_bytes;
  std::vector<overlay::packet> packets;
  for (;;) {
    if (!in.read(reinterpret_cast<char*>(head), 16)) return file.string() + ": truncated (no trailer)";
    if (std::memcmp(head, trailer, 8) == 0) {
      if (base::load_le<std::uint64_t>(head + 8) != packets.size())
        return file.string() + ": record count does not match the trailer";
      break;
    }
    if (!in.read(reinterpret_cast<char*>(head) + 16, static_cast<std::streamsize>(head_bytes - 16)))
      return file.string() + ": truncated record";
    overlay::packet p;
    p.dest = base::load_le<std::uint64_t>(head);
    p.source = base::load_le<std::uint64_t>(head + 8);
    p.tag = static_cast<std::int32_t>(base::load_le<std::uint32_t>(head + 16));
    std::uint64_t length = base::load_le<std::uint64_t>(head + 24);
    if (current) {
      const auto flags = base::load_le<std::uint32_t>(head + 20);
      constexpr std::uint32_t known = overlay::packet::handed_over | overlay::packet::ack_to_follows | kept_by_writer;
      if ((flags & ~known) != 0) return file.string() + ": malformed record";
      p.flags = static_cast<std::uint8_t>(flags & 0xff);
      p.numbered_here = (flags & kept_by_writer) != 0;
      p.stream_seq = base::load_le<std::uint64_t>(head + 24);
      p.stream_prev = base::load_le<std::uint64_t>(head + 32);
      length = base::load_le<std::uint64_t>(head + 40);
    }
    if (length > size) return file.string() + ": record longer than the file";
    p.body.resize(length);
    if (!in.read(reinterpret_cast<char*>(p.body.data()), static_cast<std::streamsize>(length)))
      return file.string() + ": truncated body";
    packets.push_back(std::move(p));
  }
  for (auto& p : packets) out.push_back(std::move(p));
  if (intervals) *intervals = std::move(states);
  if (streams) *streams = std::move(delivered);
  if (losses) *losses = std::move(lost);
  return "";
}

std::size_t drop_runtime_records(std::vector<overlay::packet>& packets) {
  return std::erase_if(packets, [](const overlay::packet& p) {
    return (p.tag < 0 && p.tag > first_service_tag) || overlay::is_stream_ack(p.tag);
  });
}

}  // namespace phoenix
