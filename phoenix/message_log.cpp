#include "phoenix/message_log.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>

#include "phoenix/service_messages.hpp"

#include "overlay/links/frame.hpp"

namespace phoenix {

namespace {

constexpr char magic[9] = "PHXLOG01";
constexpr char magic_with_state[9] = "PHXLOG02";
constexpr char trailer[9] = "PHXEND01";
constexpr std::size_t record_head_bytes = 32;

std::string io_error(const std::filesystem::path& file, const char* what) {
  return std::string(what) + " " + file.string() + ": " + std::strerror(errno);
}

}  // namespace

std::string write_message_log(const std::filesystem::path& file, const std::vector<overlay::packet>& packets,
                              const std::vector<suspended_interval>& intervals) {
  auto tmp = file;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return io_error(tmp, "cannot create");
    std::byte head[record_head_bytes];
    if (intervals.empty()) {
      out.write(magic, 8);
    } else {
      out.write(magic_with_state, 8);
      base::store_le<std::uint64_t>(head, intervals.size());
      out.write(reinterpret_cast<const char*>(head), 8);
      for (const auto& i : intervals) {
        base::store_le<std::uint64_t>(head, i.span.lo);
        base::store_le<std::uint64_t>(head + 8, i.span.hi);
        base::store_le<std::uint64_t>(head + 16, i.state.size());
        out.write(reinterpret_cast<const char*>(head), 24);
        out.write(reinterpret_cast<const char*>(i.state.data()), static_cast<std::streamsize>(i.state.size()));
      }
    }
    for (const auto& p : packets) {
      base::store_le<std::uint64_t>(head, p.dest);
      base::store_le<std::uint64_t>(head + 8, p.source);
      base::store_le<std::uint32_t>(head + 16, static_cast<std::uint32_t>(p.tag));
      base::store_le<std::uint32_t>(head + 20, 0);
      base::store_le<std::uint64_t>(head + 24, p.body.size());
      out.write(reinterpret_cast<const char*>(head), record_head_bytes);
      out.write(reinterpret_cast<const char*>(p.body.data()), static_cast<std::streamsize>(p.body.size()));
    }
    out.write(trailer, 8);
    std::byte count[8];
    base::store_le<std::uint64_t>(count, packets.size());
    out.write(reinterpret_cast<const char*>(count), 8);
    out.flush();
    if (!out) return io_error(tmp, "cannot write");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, file, ec);
  if (ec) return "cannot rename " + tmp.string() + " to " + file.string() + ": " + ec.message();
  return "";
}

std::string read_message_log(const std::filesystem::path& file, std::vector<overlay::packet>& out,
                             std::vector<suspended_interval>* intervals) {
  // A FIFO or device would block or read without end, and file_size() below throws on them.
  std::error_code ec;
  if (std::filesystem::exists(file, ec) && !std::filesystem::is_regular_file(file, ec))
    return file.string() + ": not a regular file, so not a phoenix message log";
  std::ifstream in(file, std::ios::binary);
  if (!in) return io_error(file, "cannot open");
  char m[8];
  if (!in.read(m, 8)) return file.string() + ": not a phoenix message log";
  const bool with_state = std::memcmp(m, magic_with_state, 8) == 0;
  if (!with_state && std::memcmp(m, magic, 8) != 0) return file.string() + ": not a phoenix message log";
  const auto size = std::filesystem::file_size(file, ec);
  if (ec) return file.string() + ": cannot read its size: " + ec.message();
  std::vector<suspended_interval> states;
  if (with_state) {
    std::byte head[24];
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
  std::vector<overlay::packet> packets;
  for (;;) {
    std::byte head[record_head_bytes];
    if (!in.read(reinterpret_cast<char*>(head), 16)) return file.string() + ": truncated (no trailer)";
    if (std::memcmp(head, trailer, 8) == 0) {
      if (base::load_le<std::uint64_t>(head + 8) != packets.size())
        return file.string() + ": record count does not match the trailer";
      break;
    }
    if (!in.read(reinterpret_cast<char*>(head) + 16, record_head_bytes - 16))
      return file.string() + ": truncated record";
    overlay::packet p;
    p.dest = base::load_le<std::uint64_t>(head);
    p.source = base::load_le<std::uint64_t>(head + 8);
    p.tag = static_cast<std::int32_t>(base::load_le<std::uint32_t>(head + 16));
    const auto length = base::load_le<std::uint64_t>(head + 24);
    if (length > size) return file.string() + ": record longer than the file";
    p.body.resize(length);
    if (!in.read(reinterpret_cast<char*>(p.body.data()), static_cast<std::streamsize>(length)))
      return file.string() + ": truncated body";
    packets.push_back(std::move(p));
  }
  for (auto& p : packets) out.push_back(std::move(p));
  if (intervals) *intervals = std::move(states);
  return "";
}

std::size_t drop_runtime_records(std::vector<overlay::packet>& packets) {
  return std::erase_if(packets, [](const overlay::packet& p) { return p.tag < 0 && p.tag > first_service_tag; });
}

}  // namespace phoenix
