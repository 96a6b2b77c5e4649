// overlay/link_manager.hpp — a node's links: the port it listens on, the peers it dials and redials through the
// transport of each address's scheme, connections in their handshake, and one record per neighbour (its link
// session and the connection that is its link now).
//
// It decides which connection becomes a neighbour's link (a duplicate, a displacement without proof, an
// acknowledgement beyond what was sent, a new name past max_neighbours are closed) and forgets records that
// hold nothing. What a link coming up or going down means for routing, forwarding and departure is the
// overlay's to wire (overlay.hpp); this class only reports it. Runs on the node's I/O context only.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <system_error>
#include <unordered_map>
#include <utility>
#include <vector>

#include <asio.hpp>

#include "base/log_budget.hpp"
#include "overlay/links/connection.hpp"
#include "overlay/links/link_session.hpp"
#include "overlay/links/listener.hpp"
#include "overlay/overlay_config.hpp"
#include "overlay/packet.hpp"
#include "overlay/transports/address.hpp"
#include "overlay/transports/transport.hpp"

namespace phoenix::overlay {

// What the node keeps of one resource name it linked with (about 2 KB).
struct neighbour {
  explicit neighbour(std::uint64_t window_bytes) : session(window_bytes) {}
  bool is_up() const { return conn && conn->is_up(); }

  link_session session;
  std::shared_ptr<connection> conn;
  // The secret of the connection that is (or last was) the link: a new connection displaces a working one
  // only if the peer proves it holds it (handshake.hpp, "session continuity").
  std::optional<secret_bytes> secret;
  std::string name;
  std::chrono::steady_clock::time_point down_since{};  // when its last link went down (while it has none)
  // A link that goes down again and again (a path that flaps, a peer whose frames are refused on each
  // reconnect) logs at most 5 lines a minute.
  base::log_budget down_log{std::chrono::minutes(1), 5};
  // What either end said about leaving (departure.hpp).
  bool said_goodbye = false;   // it sent its final ack: it will not come back
  bool leaving = false;        // it told us it is finalizing: not a next hop any more
  bool acked_leaving = false;  // we are finalizing, and it answered
  bool acked_goodbye = false;  // we said goodbye, and it answered
};

// One link as the shell's `links` shows it.
struct link_view {
  node_id peer = 0;
  std::string peer_name;
  std::string address;
  std::string state;
  bool outbound = false;
  std::uint64_t unacked = 0;
  std::uint64_t bytes_queued = 0;
  bool acks_held = false;  // too much of what it sent waits here for a route: it gets no acks until released
};

class link_manager {
 public:
  // `waiting_from(id)`: bytes of id's packets that wait at this node for a route (a record that has some is
  // not forgotten).
  link_manager(asio::io_context& io, const overlay_config& config, node_id self, connection_owner& owner,
               std::function<std::uint64_t(node_id)> waiting_from);
  ~link_manager();  // closes every connection, the listener and the SSH sessions
  link_manager(const link_manager&) = delete;
  link_manager& operator=(const link_manager&) = delete;

  const connection_params& params() const { return params_; }

  // Endpoints. listen() binds now and returns the bound address; add_port() dials in the background and
  // redials at the retry interval until stop_linking(). With loopback_only, both refuse any other address with
  // std::errc::permission_denied and an error that says how to make a cluster key.
  std::error_code listen(const std::string& address, std::string& bound, std::string* error);
  std::error_code add_port(const std::string& address, std::string* error);
  void stop_linking();  // no more accepting or dialling
  // An in-process link over a connected local socket pair (both managers on one io_context).
  void connect_local(link_manager& other);

  // Connection events, as the owner receives them. link_up returns the neighbour whose link c now is, or
  // nullptr if c was closed instead. link_down returns, if c was a neighbour's link, what its session had
  // not sent (everything, for a neighbour that said goodbye, whose record goes) for the caller to route.
  link_resume resume_for(node_id peer) const;
  neighbour* link_up(const std::shared_ptr<connection>& c);
  struct lost_link {
    node_id peer = 0;
    std::vector<packet> unsent;
    std::vector<packet> departed;  // link_session::take_departed, of a record erased here
  };
  std::optional<lost_link> link_down(const std::shared_ptr<connection>& c, const std::string& reason,
                                     bool expected);
  // What link_up took from the record of an incarnation that a dialled address no longer answers as.
  std::vector<packet> take_superseded() { return std::exchange(superseded_, {}); }
  // Bytes link_up freed: packets a resumed session's peer already had.
  std::uint64_t take_resume_freed() { return std::exchange(resume_freed_, 0); }
  // Closes c as a network failure would and reports it to the owner.
  void drop(connection& c, const std::string& reason);
  std::size_t drop_links();     // fault injection: every link
  bool drop_link(node_id peer);  // fault injection: the link to one neighbour

  // Neighbour records. record() makes one if there is none (a packet queued for a next hop before its link
  // came up).
  neighbour* find(node_id peer);
  const neighbour* find(node_id peer) const;
  neighbour& record(node_id peer);
  const std::unordered_map<node_id, std::unique_ptr<neighbour>>& neighbours() const { return neighbours_; }
  std::unordered_map<node_id, std::unique_ptr<neighbour>>& neighbours() { return neighbours_; }

  // Control frames: to every neighbour whose link is up (returns the bytes queued), or to one.
  std::uint64_t send_to_all(const std::vector<std::byte>& frame);
  std::uint64_t send_to(node_id peer, std::vector<std::byte> frame);
  bool is_quiet() const;  // nothing left to write on any link

  // Direct reads while an application thread spins for a message (connection::begin_direct): the link that
  // brought the last data frame (note_data_from) is read directly until end_direct_reads().
  void note_data_from(node_id peer) { last_data_from_ = peer; }
  bool begin_direct_reads();
  std::size_t read_direct();
  void end_direct_reads();

  void add_views(std::vector<link_view>& out) const;
  std::uint64_t links_lost() const { return links_lost_; }
  std::uint64_t frames_rejected() const { return frames_rejected_; }
  std::uint64_t neighbours_forgotten() const { return neighbours_forgotten_; }
  std::uint64_t neighbours_refused() const { return neighbours_refused_; }
  std::uint64_t accept_failures() const { return listener_ ? listener_->accept_failures() : 0; }
  std::uint64_t handshakes_refused() const { return listener_ ? listener_->handshakes_refused() : 0; }

 private:
  struct dialer {
    address target;
    std::string text;
    std::unique_ptr<asio::steady_timer> timer;
    std::shared_ptr<connection> conn;
    node_id peer = 0;  // learned at the first handshake
    unsigned failures = 0;
    base::log_budget refusal_log{std::chrono::minutes(1)};  // a refusal is a configuration problem: warn once a minute
  };

  bool refuses_address(const address& a, std::string* error) const;  // loopback_only and not loopback
  void dial(dialer& d);
  transport& transport_for(address::scheme_t scheme);
  void schedule_redial(dialer& d, unsigned intervals = 1);
  void log_link_failure(const std::string& endpoint, bool refused, unsigned failures, const std::string& reason,
                        base::log_budget& refusals);
  dialer* dialer_of(const connection& c);
  void start_connection(std::shared_ptr<connection> c);
  void end_handshake(const std::shared_ptr<connection>& c);
  void close_refused(const std::shared_ptr<connection>& c, unsigned redial_intervals);
  bool keeps_existing(const connection& existing, const connection& incoming) const;
  bool is_unused(node_id id, const neighbour& nb) const;
  bool make_room_for_neighbour();
  void arm_expiry();
  void forget_unused_neighbours(std::chrono::steady_clock::time_point now);
  void arm_memory_trim();

  asio::io_context& io_;
  const overlay_config& config_;
  connection_owner& owner_;
  std::function<std::uint64_t(node_id)> waiting_from_;
  connection_params params_;
  tcp_transport tcp_;
  ssh_transport ssh_;
  std::unique_ptr<listener> listener_;
  std::vector<std::unique_ptr<dialer>> dialers_;
  std::set<std::shared_ptr<connection>> handshaking_;
  std::unordered_map<node_id, std::unique_ptr<neighbour>> neighbours_;
  std::vector<packet> superseded_;
  std::uint64_t resume_freed_ = 0;
  void supersede(node_id old_peer, const std::string& address);
  node_id last_data_from_ = 0;          // the neighbour whose link brought the last data frame
  std::shared_ptr<connection> direct_;  // its connection, while read directly
  asio::steady_timer expiry_timer_;     // armed while a record may expire (forget_unused_neighbours)
  bool expiry_armed_ = false;
  asio::steady_timer trim_timer_;  // armed while closed connections' memory waits to go back (arm_memory_trim)
  // False once destroyed: a wait that completed before the destructor's cancel() still runs its handler.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  bool trim_armed_ = false;
  bool stopped_ = false;  // stop_linking
  std::uint64_t links_lost_ = 0;
  std::uint64_t frames_rejected_ = 0;
  std::uint64_t neighbours_forgotten_ = 0;
  std::uint64_t neighbours_refused_ = 0;
  // Warnings anyone can trigger: refused connections that came in (from any number of addresses, so one budget
  // for all of them) and connections that claimed a working link without proving they continue it.
  base::log_budget inbound_refusal_log_{std::chrono::minutes(1), 5};
  base::log_budget displacement_log_{std::chrono::minutes(1)};
  base::log_budget neighbour_limit_log_{std::chrono::minutes(1)};
};

}  // namespace phoenix::overlay
