#include "phoenix/volpex/read_log.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "phoenix/volpex/log.hpp"

namespace phoenix::volpex {

namespace {

std::runtime_error io_error(const std::string& what) {
  return std::runtime_error("volpex read log: " + what + ": " + std::strerror(errno));
}

}  // namespace

read_log::read_log(options o) : options_(std::move(o)) {
  options_.capacity = std::max<std::size_t>(2, options_.capacity);
}

read_log::~read_log() {
  if (spill_fd_ >= 0) ::close(spill_fd_);
}

bool read_log::done_with(const std::vector<replica_name>& served) const {
  return options_.replicas != 0 && served.size() >= options_.replicas;
}

void read_log::add(call_id id, std::uint64_t vnode, object data, replica_name first) {
  assert(!contains(id));
  log_entry e{id, vnode, std::move(data), {first}};
  if (done_with(e.served)) {  // one replica per process: nobody will ask again
    ++stats_.forgotten;
    return;
  }
  if (memory_.size() >= options_.capacity) spill_older_half();
  memory_.emplace(id, std::move(e));
  order_.push_back(id);
  // Entries forgotten out of order leave their ids behind in order_: sweep them before they outnumber the rest.
  if (order_.size() > 2 * options_.capacity)
    std::erase_if(order_, [&](const call_id& c) { return !memory_.contains(c); });
}

bool read_log::contains(call_id id) const { return memory_.contains(id) || spilled_.contains(id); }

std::optional<object> read_log::serve(call_id id, replica_name replica) {
  const auto note = [&](std::vector<replica_name>& served) {
    if (std::find(served.begin(), served.end(), replica) == served.end()) served.push_back(replica);
    return done_with(served);
  };
  if (auto it = memory_.find(id); it != memory_.end()) {
    object data = it->second.data;
    if (note(it->second.served)) {
      memory_.erase(it);  // its id stays in order_ until it comes to the front
      ++stats_.forgotten;
    }
    return data;
  }
  if (auto it = spilled_.find(id); it != spilled_.end()) {
    object data = make_object(read_spilled(it->second));
    ++stats_.read_back;
    if (note(it->second.served)) {
      spilled_.erase(it);  // its bytes stay in the file, which only grows (docs/volpex.md)
      ++stats_.forgotten;
    }
    return data;
  }
  return std::nullopt;
}

// The older half goes to the end of the spill file, in insertion order; the newer half stays.
void read_log::spill_older_half() {
  if (spill_fd_ < 0) open_spill_file();
  const std::size_t keep = options_.capacity / 2;
  while (memory_.size() > keep && !order_.empty()) {
    const call_id id = order_.front();
    order_.pop_front();
    const auto it = memory_.find(id);
    if (it == memory_.end()) continue;  // forgotten meanwhile
    const Bytes& body = *it->second.data;
    std::size_t done = 0;
    while (done < body.size()) {
      const auto n =
          ::pwrite(spill_fd_, body.data() + done, body.size() - done, static_cast<off_t>(spill_end_ + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw io_error("writing the spill file");
      done += static_cast<std::size_t>(n);
    }
    spilled_.emplace(id,
                     spilled_entry{it->second.vnode, spill_end_, body.size(), std::move(it->second.served)});
    spill_end_ += body.size();
    stats_.spill_bytes += body.size();
    memory_.erase(it);
  }
  ++stats_.spills;
  logger()->debug("read log: older half spilled ({} entries on disk, {} bytes)", spilled_.size(), spill_end_);
}

void read_log::open_spill_file() {
  std::filesystem::path dir = options_.spill_dir;
  if (dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    dir = tmp && *tmp ? tmp : "/tmp";
  }
  std::string name = (dir / "phoenix-volpex-log.XXXXXX").string();
  spill_fd_ = ::mkstemp(name.data());
  if (spill_fd_ < 0) throw io_error("creating a spill file in " + dir.string());
  ::unlink(name.c_str());
}

Bytes read_log::read_spilled(const spilled_entry& s) {
  Bytes body(s.length);
  std::size_t done = 0;
  while (done < s.length) {
    const auto n = ::pread(spill_fd_, body.data() + done, s.length - done, static_cast<off_t>(s.offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw io_error("reading the spill file back");
    done += static_cast<std::size_t>(n);
  }
  return body;
}

std::vector<log_entry> read_log::extract(std::uint64_t lo, std::uint64_t hi) {
  std::vector<log_entry> out;
  const auto inside = [&](std::uint64_t v) { return v >= lo && v < hi; };
  for (auto it = memory_.begin(); it != memory_.end();) {
    if (!inside(it->second.vnode)) {
      ++it;
      continue;
    }
    out.push_back(std::move(it->second));
    it = memory_.erase(it);
  }
  for (auto it = spilled_.begin(); it != spilled_.end();) {
    if (!inside(it->second.vnode)) {
      ++it;
      continue;
    }
    out.push_back(log_entry{it->first, it->second.vnode, make_object(read_spilled(it->second)),
                            std::move(it->second.served)});
    it = spilled_.erase(it);
  }
  std::erase_if(order_, [&](const call_id& id) { return !memory_.contains(id); });
  return out;
}

void read_log::insert(std::vector<log_entry> entries) {
  for (auto& e : entries) {
    if (contains(e.id) || done_with(e.served)) continue;
    if (memory_.size() >= options_.capacity) spill_older_half();
    const call_id id = e.id;
    memory_.emplace(id, std::move(e));
    order_.push_back(id);
  }
}

read_log::stats read_log::statistics() const {
  stats s = stats_;
  s.in_memory = memory_.size();
  s.spilled = spilled_.size();
  return s;
}

}  // namespace phoenix::volpex
