// dataspace_capi.cpp — the C API of the Volpex dataspace (phoenix/volpex.h): one client on a node of its own.
#include <phoenix/volpex.h>

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "phoenix/launch/node_line.hpp"
#include "phoenix/service_messages.hpp"
#include "phoenix/volpex/client.hpp"
#include "phoenix/volpex/communicator.hpp"
#include "phoenix/volpex/log.hpp"

namespace {

struct volpex_process {
  phoenix::Node node;
  std::unique_ptr<phoenix::volpex::client> client;
  std::unique_ptr<phoenix::volpex::communicator> comm;
  int id = -1;
  int count = -1;
};

std::mutex lifecycle_mu;

// Started by the shell (phsh spawn --replicas; PHSH_ROLE=replica): stdout carries its report lines too
// (phoenix/shell/reports.hpp), beside what the application prints.
bool started_by_shell() {
  const char* role = std::getenv("PHSH_ROLE");
  return role && std::string_view(role) == "replica";
}

void report_line(const std::string& line) {
  std::fputs((line + "\n").c_str(), stdout);
  std::fflush(stdout);
}
// Never destroyed at exit: a process that calls exit() without volpex_finalize (after an error, say) must not
// destroy the node and the communicator under their own threads, still running. The OS reclaims them.
std::unique_ptr<volpex_process>& process = *new std::unique_ptr<volpex_process>;

// exit() without volpex_finalize: the serving thread and the node's background thread must stop before the
// static objects they use (loggers, error categories) are destroyed. Registered once they all exist (the node
// and the communicator started), this runs before their destructors do. The node's neighbours see it crash.
void halt_at_exit() {
  if (!process) return;
  if (process->comm) process->comm->stop_serving();
  phoenix::service_messages::halt(process->node);
}

int code(const std::error_code& ec) {
  if (!ec) return PH_OK;
  if (ec.category() == phoenix::error_category()) return ec.value();
  return PH_EIO;
}

bool env_int(const char* name, int& out) {
  const char* v = std::getenv(name);
  if (!v || !*v) return false;
  const std::string_view s(v);
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

template <class T>
bool env_number(const char* name, T& out) {
  const char* v = std::getenv(name);
  if (!v || !*v) return true;  // absent: the default stays
  const std::string_view s(v);
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  if (ec == std::errc() && end == s.data() + s.size()) return true;
  phoenix::volpex::logger()->error("{}={}: not a number", name, v);
  return false;
}

// The message-passing options of phoenix/volpex.h's environment; false (logged) if one is malformed.
bool comm_options_from_env(phoenix::volpex::comm_options& o) {
  if (!env_number("VOLPEX_REPLICA", o.replica) || !env_number("VOLPEX_REPLICAS", o.replicas) ||
      !env_number("VOLPEX_LOG_BYTES", o.log_capacity_bytes))
    return false;
  int keep = 1;
  if (!env_number("VOLPEX_SENDER_LOG", keep)) return false;
  o.sender_log = keep != 0;
  std::uint64_t timeout_ms = 500;
  if (!env_number("VOLPEX_TIMEOUT_MS", timeout_ms)) return false;
  o.selection.timeout = std::chrono::milliseconds(timeout_ms);
  std::uint64_t suspect_ms = static_cast<std::uint64_t>(o.liveness.suspect_after.count());
  std::uint64_t give_up_ms = static_cast<std::uint64_t>(o.liveness.give_up_after.count());
  if (!env_number("VOLPEX_SUSPECT_MS", suspect_ms) || !env_number("VOLPEX_GIVE_UP_MS", give_up_ms))
    return false;
  if (give_up_ms < suspect_ms) {
    phoenix::volpex::logger()->error("VOLPEX_GIVE_UP_MS ({}) must be at least VOLPEX_SUSPECT_MS ({})",
                                     give_up_ms, suspect_ms);
    return false;
  }
  o.liveness.suspect_after = std::chrono::milliseconds(suspect_ms);
  o.liveness.give_up_after = std::chrono::milliseconds(give_up_ms);
  if (const char* s = std::getenv("VOLPEX_SELECTION"); s && *s) {
    const auto p = phoenix::volpex::parse_selection(s);
    if (!p) {
      phoenix::volpex::logger()->error(
          "VOLPEX_SELECTION={}: expected team, timeout, timestamp, network or hybrid", s);
      return false;
    }
    o.selection.policy = *p;
  }
  if (o.replicas == 0) {
    phoenix::volpex::logger()->error("VOLPEX_REPLICAS must be at least 1");
    return false;
  }
  return true;
}

bool bad_tag(const char* tag, int tag_size) { return !tag || tag_size <= 0; }

int fetch(bool get, const char* tag, int tag_size, void* data, int data_size) {
  if (bad_tag(tag, tag_size) || data_size < 0 || (!data && data_size > 0)) return PH_EINVAL;
  if (!process) return PH_ESTATE;
  std::error_code ec;
  const std::string_view t(tag, static_cast<std::size_t>(tag_size));
  auto object = get ? process->client->get(t, &ec) : process->client->read(t, &ec);
  if (!object) return code(ec);
  const std::size_t n = std::min(object->size(), static_cast<std::size_t>(data_size));
  if (n) std::memcpy(data, object->data(), n);
  return static_cast<int>(std::min<std::size_t>(object->size(), INT32_MAX));
}

}  // namespace

extern "C" {

int volpex_init(int /*argc*/, char* /*argv*/[]) {
  std::lock_guard lock(lifecycle_mu);
  if (process) return PH_ESTATE;
  int id = -1, count = -1;
  if (!env_int("VOLPEX_NUM_PROCS", count) || count <= 0 || !env_int("VOLPEX_PROC_ID", id) || id < 0 ||
      id >= count) {
    phoenix::volpex::logger()->error(
        "volpex_init: VOLPEX_PROC_ID and VOLPEX_NUM_PROCS must name a process 0..N-1");
    return PH_ECONFIG;
  }
  phoenix::volpex::comm_options comm;
  comm.rank = static_cast<phoenix::volpex::rank_id>(id);
  comm.ranks = static_cast<unsigned>(count);
  if (!comm_options_from_env(comm)) return PH_ECONFIG;
  std::optional<phoenix::volpex::client::crash_point> crash_point;
  if (const char* crash = std::getenv("VOLPEX_CRASH_AT"); crash && *crash) {
    const std::string_view c(crash);
    if (c.rfind("serve:", 0) == 0) {
      const auto [end, ec] = std::from_chars(c.data() + 6, c.data() + c.size(), comm.crash_on_serve);
      if (ec != std::errc() || end != c.data() + c.size()) comm.crash_on_serve = 0;
    } else {
      crash_point = phoenix::volpex::client::parse_crash_point(c);
    }
    if (!crash_point && comm.crash_on_serve == 0) {
      phoenix::volpex::logger()->error(
          "VOLPEX_CRASH_AT={}: expected before-|after- put|get|read :N, or serve:N", crash);
      return PH_ECONFIG;
    }
  }
  auto p = std::make_unique<volpex_process>();
  if (const auto ec = p->node.initialize("")) return code(ec);
  p->client = std::make_unique<phoenix::volpex::client>(p->node, static_cast<phoenix::volpex::process_id>(id));
  if (crash_point) p->client->crash_at(*crash_point);
  p->comm = std::make_unique<phoenix::volpex::communicator>(p->node, *p->client, comm);
  if (const auto ec = p->comm->start(std::chrono::seconds(60))) {
    phoenix::volpex::logger()->error("volpex_init: registering this replica failed: {}", ec.message());
    p->comm.reset();
    p->client.reset();
    p->node.finalize();
    return code(ec);
  }
  p->id = id;
  p->count = count;
  static const bool stops_at_exit = std::atexit(halt_at_exit) == 0;
  if (!stops_at_exit) phoenix::volpex::logger()->warn("volpex_init: exit() without volpex_finalize is unsafe");
  if (started_by_shell()) {
    report_line(phoenix::launch::port_line(p->node.local_port()));
    report_line(phoenix::launch::replica_line(id, comm.replica));
  }
  process = std::move(p);
  return PH_OK;
}

int volpex_put(const char* tag, int tag_size, const void* data, int data_size) {
  if (bad_tag(tag, tag_size) || data_size < 0 || (!data && data_size > 0)) return PH_EINVAL;
  if (!process) return PH_ESTATE;
  const auto bytes = std::span(static_cast<const std::byte*>(data), static_cast<std::size_t>(data_size));
  return code(process->client->put(std::string_view(tag, static_cast<std::size_t>(tag_size)), bytes));
}

int volpex_get(const char* tag, int tag_size, void* data, int data_size) {
  return fetch(true, tag, tag_size, data, data_size);
}

int volpex_read(const char* tag, int tag_size, void* data, int data_size) {
  return fetch(false, tag, tag_size, data, data_size);
}

int volpex_send(int dest, int tag, const void* data, int data_size) {
  if (dest < 0 || tag < 0 || data_size < 0 || (!data && data_size > 0)) return PH_EINVAL;
  if (!process) return PH_ESTATE;
  const auto bytes = std::span(static_cast<const std::byte*>(data), static_cast<std::size_t>(data_size));
  return code(process->comm->send(static_cast<phoenix::volpex::rank_id>(dest), tag, bytes));
}

int volpex_recv(int source, int tag, void* data, int data_size, int* source_out, int* tag_out) {
  if (data_size < 0 || (!data && data_size > 0)) return PH_EINVAL;
  if (!process) return PH_ESTATE;
  std::error_code ec;
  auto m = process->comm->recv(source, tag, &ec);
  if (!m) return code(ec);
  const std::size_t n = std::min(m->body.size(), static_cast<std::size_t>(data_size));
  if (n) std::memcpy(data, m->body.data(), n);
  if (source_out) *source_out = static_cast<int>(m->source);
  if (tag_out) *tag_out = m->tag;
  return static_cast<int>(std::min<std::size_t>(m->body.size(), INT32_MAX));
}

int volpex_getProcId(void) { return process ? process->id : -1; }
int volpex_getNumProc(void) { return process ? process->count : -1; }

void volpex_finalize(void) {
  std::lock_guard lock(lifecycle_mu);
  if (!process) return;
  // Its computation is done; the shell may stop lagging twins once every process has a replica this far.
  if (started_by_shell()) report_line(std::string(phoenix::launch::completed_line));
  // Lagging replicas of other processes may still pull what this one sent: serve them first (bounded).
  process->comm->finish(std::chrono::seconds(60));
  process->comm.reset();
  process->client.reset();
  process->node.finalize();
  process.reset();
  if (started_by_shell()) report_line(std::string(phoenix::launch::finished_line));
}

}  // extern "C"
