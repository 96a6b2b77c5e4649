// capi.cpp — the C API (phoenix/phoenix.h): the paper's ph_* calls over one process-wide default node.
//
// The default node is created by ph_initialize (configuration from PHOENIX_CONFIG / PHOENIX_* variables)
// and destroyed by ph_finalize. Calls other than initialize/finalize may come from any thread concurrently;
// initialize and finalize must not race with other calls (as with MPI_Init/MPI_Finalize).
#include <phoenix/node.hpp>
#include <phoenix/phoenix.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>

struct ph_msg {
  phoenix::Message m;
};

namespace {

std::mutex lifecycle_mu;
std::unique_ptr<phoenix::Node> default_node;
std::string default_port;  // ph_local_port's storage, stable until ph_finalize

int code(const std::error_code& ec) {
  if (!ec) return PH_OK;
  if (ec.category() == phoenix::error_category()) return ec.value();
  return PH_EIO;
}

phoenix::Node* node() {
  auto* n = default_node.get();
  return n && n->running() ? n : nullptr;
}

ph_msg_t* wrap(std::optional<phoenix::Message> m) { return m ? new ph_msg{std::move(*m)} : nullptr; }

}  // namespace

extern "C" {

int ph_initialize(const char* port, const char* log_in) {
  std::lock_guard lock(lifecycle_mu);
  if (node()) return PH_ESTATE;
  auto n = std::make_unique<phoenix::Node>();
  if (const auto ec = n->initialize(port ? port : "", log_in)) return code(ec);
  default_node = std::move(n);
  default_port = default_node->local_port();
  return PH_OK;
}

int ph_add_port(const char* peer) {
  if (!peer) return PH_EINVAL;
  auto* n = node();
  return n ? code(n->add_port(peer)) : PH_ESTATE;
}

ph_vp_t ph_resource_name(void) {
  auto* n = node();
  return n ? n->resource_name() : 0;
}

ph_vp_t ph_space_size(void) {
  auto* n = node();
  return n ? n->space_size() : 0;
}

const char* ph_local_port(void) { return node() ? default_port.c_str() : nullptr; }

int ph_finalize(const char* log_out) {
  std::lock_guard lock(lifecycle_mu);
  auto* n = node();
  if (!n) return PH_ESTATE;
  const int rc = code(n->finalize(log_out));
  default_node.reset();
  default_port.clear();
  return rc;
}

int ph_suspend(const char* file) {
  std::lock_guard lock(lifecycle_mu);
  auto* n = node();
  if (!n) return PH_ESTATE;
  const int rc = code(n->suspend(file));
  if (!n->running()) {  // suspended (or finalized by a failed write): the default node is gone
    default_node.reset();
    default_port.clear();
  }
  return rc;
}

int ph_send(ph_vp_t dest, int tag, const void* data, size_t len) {
  auto* n = node();
  return n ? code(n->send(dest, tag, data, len)) : PH_ESTATE;
}

ph_msg_t* ph_recv(int tag) {
  auto* n = node();
  return n ? wrap(n->recv(tag)) : nullptr;
}

ph_msg_t* ph_try_recv(int tag) {
  auto* n = node();
  return n ? wrap(n->try_recv(tag)) : nullptr;
}

ph_msg_t* ph_recv_timeout(int tag, int timeout_ms) {
  auto* n = node();
  return n ? wrap(n->recv_for(tag, std::chrono::milliseconds(timeout_ms))) : nullptr;
}

const void* ph_msg_data(const ph_msg_t* m) { return m ? m->m.data() : nullptr; }
size_t ph_msg_size(const ph_msg_t* m) { return m ? m->m.size() : 0; }
int ph_msg_tag(const ph_msg_t* m) { return m ? m->m.tag() : PH_EINVAL; }
ph_vp_t ph_msg_dest(const ph_msg_t* m) { return m ? m->m.dest() : 0; }
ph_vp_t ph_msg_source(const ph_msg_t* m) { return m ? m->m.source() : 0; }
void ph_msg_free(ph_msg_t* m) { delete m; }

int ph_assume(ph_vps_t s) {
  auto* n = node();
  return n ? code(n->assume({s.lo, s.hi})) : PH_ESTATE;
}

int ph_release(ph_vps_t s) {
  auto* n = node();
  return n ? code(n->release({s.lo, s.hi})) : PH_ESTATE;
}

// Writes at most `max` intervals and returns how many the node assumes (more than max: the caller may retry
// with a larger array, as with snprintf).
int ph_assumed(ph_vps_t* out, size_t max) {
  if (!out && max > 0) return PH_EINVAL;
  auto* n = node();
  if (!n) return PH_ESTATE;
  const auto all = n->assumed();
  for (size_t i = 0; i < all.size() && i < max; ++i) out[i] = ph_vps_t{all[i].lo, all[i].hi};
  return static_cast<int>(all.size());
}

int ph_orphaned(ph_orphan_t* out, size_t max) {
  if (!out && max > 0) return PH_EINVAL;
  auto* n = node();
  if (!n) return PH_ESTATE;
  const auto all = n->orphaned();
  for (size_t i = 0; i < all.size() && i < max; ++i)
    out[i] = ph_orphan_t{ph_vps_t{all[i].span.lo, all[i].span.hi}, all[i].owner, all[i].lost_for.count()};
  return static_cast<int>(all.size());
}

int ph_set_adoption_handler(ph_adopt_fn fn, void* ctx) {
  if (!fn) return PH_EINVAL;
  auto* n = node();
  if (!n) return PH_ESTATE;
  return code(n->set_adoption_handler(
      [fn, ctx](phoenix::Interval s, phoenix::vp_t owner) { fn(ph_vps_t{s.lo, s.hi}, owner, ctx); }));
}

int ph_set_state_handlers(ph_pack_fn pack, ph_unpack_fn unpack, void* ctx) {
  if (!pack || !unpack) return PH_EINVAL;
  auto* n = node();
  if (!n) return PH_ESTATE;
  auto pack_state = [pack, ctx](phoenix::Interval s) -> std::optional<phoenix::Bytes> {
    void* data = nullptr;
    size_t len = 0;
    if (pack(ph_vps_t{s.lo, s.hi}, &data, &len, ctx) != 0 || (!data && len > 0)) {
      std::free(data);
      return std::nullopt;
    }
    phoenix::Bytes b(len);
    if (len > 0) std::memcpy(b.data(), data, len);
    std::free(data);
    return b;
  };
  auto unpack_state = [unpack, ctx](phoenix::Interval s, std::span<const std::byte> data) {
    return unpack(ph_vps_t{s.lo, s.hi}, data.data(), data.size(), ctx) == 0;
  };
  return code(n->set_state_handlers(pack_state, unpack_state));
}

int ph_join(int timeout_ms) {
  auto* n = node();
  return n ? code(n->join(std::chrono::milliseconds(timeout_ms))) : PH_ESTATE;
}

int ph_leave(int timeout_ms) {
  auto* n = node();
  return n ? code(n->leave(std::chrono::milliseconds(timeout_ms))) : PH_ESTATE;
}

int ph_poll(void) {
  auto* n = node();
  return n ? n->poll() : PH_ESTATE;
}

}  // extern "C"
