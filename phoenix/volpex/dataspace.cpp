#include "phoenix/volpex/dataspace.hpp"

#include <xxhash.h>

#include "base/wire.hpp"

namespace phoenix::volpex {

std::uint64_t vnode_of(std::string_view tag, std::uint64_t space_size) {
  return space_size == 0 ? 0 : XXH64(tag.data(), tag.size(), 0) % space_size;
}

const char* to_string(op o) {
  switch (o) {
    case op::put:
      return "put";
    case op::get:
      return "get";
    case op::read:
      return "read";
    case op::decide:
      return "decide";
  }
  return "?";
}

const char* to_string(outcome o) {
  switch (o) {
    case outcome::stored:
      return "stored";
    case outcome::ignored:
      return "ignored";
    case outcome::delivered:
      return "delivered";
    case outcome::from_log:
      return "from_log";
    case outcome::lost:
      return "lost";
    case outcome::absent:
      return "absent";
  }
  return "?";
}

dataspace::dataspace(options o) : options_(std::move(o)), log_(options_.log) {}

bool dataspace::is_replica(call_id id) const {
  if (!options_.replica_rules) return false;
  const auto it = current_.find(id.process);
  return it != current_.end() && id.request <= it->second;
}

void dataspace::note_served(call_id id) {
  auto& c = current_[id.process];
  c = std::max(c, id.request);
}

std::optional<request_number> dataspace::current(process_id p) const {
  const auto it = current_.find(p);
  if (it == current_.end()) return std::nullopt;
  return it->second;
}

void dataspace::handle(request r, std::vector<reply>& out) {
  if (r.kind == op::decide) return decide(r, out);
  if (r.kind == op::put) {
    if (is_replica(r.id)) {
      ++stats_.replica_puts;
      out.push_back(reply{r.reply_to, op::put, r.id, outcome::ignored, nullptr});
      return;
    }
    ++stats_.puts;
    note_served(r.id);
    table_[r.tag] = std::move(r.data);
    out.push_back(reply{r.reply_to, op::put, r.id, outcome::stored, nullptr});
    serve_waiting(r.tag, out);
    return;
  }
  if (is_replica(r.id)) return answer_from_log(r, out);
  if (table_.contains(r.tag)) return deliver(r, out);
  ++stats_.waiting;
  waiting_[r.tag].push_back(std::move(r));  // beside an identical call waiting already, if any
}

void dataspace::decide(request& r, std::vector<reply>& out) {
  auto it = table_.find(r.tag);
  if (it == table_.end() && r.data && !r.data->empty()) {
    it = table_.emplace(r.tag, std::move(r.data)).first;
    serve_waiting(r.tag, out);  // a get or read of the tag, if the application named it so
    it = table_.find(r.tag);
  }
  if (it == table_.end()) {
    out.push_back(reply{r.reply_to, op::decide, r.id, outcome::absent, nullptr});
    return;
  }
  out.push_back(reply{r.reply_to, op::decide, r.id, outcome::delivered, it->second});
}

void dataspace::deliver(const request& r, std::vector<reply>& out) {
  const auto it = table_.find(r.tag);
  object data = it->second;
  // Without the replica rules (a test's control) nothing is ever answered from the log, and a replica's call
  // arrives here again under an id the log holds: log nothing.
  if (options_.replica_rules) {
    object logged = data;
    if (options_.mode == logging::copy) {
      logged = make_object(Bytes(data->begin(), data->end()));
      stats_.copied_bytes += data->size();
    }
    log_.add(r.id, vnode_of(r.tag, options_.space_size), std::move(logged), r.reply_to);
  }
  if (r.kind == op::get) table_.erase(it);
  note_served(r.id);
  ++stats_.delivered;
  out.push_back(reply{r.reply_to, r.kind, r.id, outcome::delivered, std::move(data)});
}

void dataspace::answer_from_log(const request& r, std::vector<reply>& out) {
  auto data = log_.serve(r.id, r.reply_to);
  if (!data) {
    ++stats_.lost;
    out.push_back(reply{r.reply_to, r.kind, r.id, outcome::lost, nullptr});
    return;
  }
  ++stats_.from_log;
  out.push_back(reply{r.reply_to, r.kind, r.id, outcome::from_log, std::move(*data)});
}

// After a put: the waiting calls of the tag, oldest first. A get takes the object, so later new calls keep
// waiting; a call identical to one just served comes after it and is answered from the log.
void dataspace::serve_waiting(const std::string& tag, std::vector<reply>& out) {
  const auto it = waiting_.find(tag);
  if (it == waiting_.end()) return;
  auto& queue = it->second;
  for (auto w = queue.begin(); w != queue.end();) {
    if (is_replica(w->id)) {
      answer_from_log(*w, out);
    } else if (table_.contains(tag)) {
      deliver(*w, out);
    } else {
      ++w;
      continue;
    }
    w = queue.erase(w);
    --stats_.waiting;
  }
  if (queue.empty()) waiting_.erase(it);
}

dataspace::stats dataspace::statistics() const {
  stats s = stats_;
  s.objects = table_.size();
  s.log = log_.statistics();
  return s;
}

// --- migration
// ------------------------------------------------------------------------------------------------

namespace {

constexpr std::uint8_t pack_version = 1;

void put_string(base::writer& w, std::string_view s) {
  w.put_u32(static_cast<std::uint32_t>(s.size()));
  w.put_bytes(std::as_bytes(std::span(s.data(), s.size())));
}

void put_blob(base::writer& w, const Bytes& b) {
  w.put_u64(b.size());
  w.put_bytes(std::span(b.data(), b.size()));
}

bool get_string(base::reader& r, std::string& out) {
  std::uint32_t n = 0;
  if (!r.get_u32(n)) return false;
  const auto s = r.get_span(n);
  if (!s) return false;
  out.assign(reinterpret_cast<const char*>(s->data()), s->size());
  return true;
}

bool get_blob(base::reader& r, object& out) {
  std::uint64_t n = 0;
  if (!r.get_u64(n) || n > r.remaining()) return false;
  const auto s = r.get_span(static_cast<std::size_t>(n));
  if (!s) return false;
  out = make_object(Bytes(s->begin(), s->end()));
  return true;
}

bool get_count(base::reader& r, std::uint32_t& n) {
  // Every element takes at least one byte: a count beyond what is left is malformed (and would over-reserve).
  return r.get_u32(n) && n <= r.remaining();
}

}  // namespace

Bytes dataspace::pack(std::uint64_t lo, std::uint64_t hi) {
  const auto inside = [&](const std::string& tag) {
    const auto v = vnode_of(tag, options_.space_size);
    return v >= lo && v < hi;
  };
  base::writer w;
  w.put_u8(pack_version);
  w.put_u32(static_cast<std::uint32_t>(current_.size()));
  for (const auto& [p, n] : current_) w.put_u32(p).put_u64(n);

  std::vector<std::pair<std::string, object>> objects;
  for (auto it = table_.begin(); it != table_.end();) {
    if (!inside(it->first)) {
      ++it;
      continue;
    }
    objects.emplace_back(it->first, std::move(it->second));
    it = table_.erase(it);
  }
  w.put_u32(static_cast<std::uint32_t>(objects.size()));
  for (const auto& [tag, data] : objects) {
    put_string(w, tag);
    put_blob(w, *data);
  }

  std::vector<request> waiting;
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (!inside(it->first)) {
      ++it;
      continue;
    }
    for (auto& r : it->second) waiting.push_back(std::move(r));
    it = waiting_.erase(it);
  }
  stats_.waiting -= waiting.size();
  w.put_u32(static_cast<std::uint32_t>(waiting.size()));
  for (const auto& r : waiting) {
    w.put_u8(static_cast<std::uint8_t>(r.kind)).put_u32(r.id.process).put_u64(r.id.request).put_u64(r.reply_to);
    put_string(w, r.tag);
  }

  const auto entries = log_.extract(lo, hi);
  w.put_u32(static_cast<std::uint32_t>(entries.size()));
  for (const auto& e : entries) {
    w.put_u32(e.id.process).put_u64(e.id.request).put_u64(e.vnode);
    w.put_u32(static_cast<std::uint32_t>(e.served.size()));
    for (const auto s : e.served) w.put_u64(s);
    put_blob(w, *e.data);
  }
  auto bytes = std::move(w).take();
  return Bytes(bytes.begin(), bytes.end());
}

bool dataspace::unpack(std::span<const std::byte> packed) {
  base::reader r(packed);
  std::uint8_t version = 0;
  std::uint32_t n = 0;
  if (!r.get_u8(version) || version != pack_version || !get_count(r, n)) return false;
  std::vector<std::pair<process_id, request_number>> current;
  for (std::uint32_t i = 0; i < n; ++i) {
    process_id p = 0;
    request_number q = 0;
    if (!r.get_u32(p) || !r.get_u64(q)) return false;
    current.emplace_back(p, q);
  }
  if (!get_count(r, n)) return false;
  std::vector<std::pair<std::string, object>> objects(n);
  for (auto& [tag, data] : objects)
    if (!get_string(r, tag) || !get_blob(r, data)) return false;
  if (!get_count(r, n)) return false;
  std::vector<request> waiting(n);
  for (auto& w : waiting) {
    std::uint8_t kind = 0;
    if (!r.get_u8(kind) || !r.get_u32(w.id.process) || !r.get_u64(w.id.request) || !r.get_u64(w.reply_to) ||
        !get_string(r, w.tag))
      return false;
    if (kind != static_cast<std::uint8_t>(op::get) && kind != static_cast<std::uint8_t>(op::read)) return false;
    w.kind = static_cast<op>(kind);
  }
  if (!get_count(r, n)) return false;
  std::vector<log_entry> entries(n);
  for (auto& e : entries) {
    std::uint32_t served = 0;
    if (!r.get_u32(e.id.process) || !r.get_u64(e.id.request) || !r.get_u64(e.vnode) || !get_count(r, served))
      return false;
    e.served.resize(served);
    for (auto& s : e.served)
      if (!r.get_u64(s)) return false;
    if (!get_blob(r, e.data)) return false;
  }
  if (!r.at_end()) return false;

  for (const auto& [p, q] : current) note_served({p, q});
  for (auto& [tag, data] : objects) table_[tag] = std::move(data);
  log_.insert(std::move(entries));
  for (auto& w : waiting) {
    ++stats_.waiting;
    waiting_[w.tag].push_back(std::move(w));
  }
  return true;
}

}  // namespace phoenix::volpex
