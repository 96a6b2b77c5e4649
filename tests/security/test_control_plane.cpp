// Attacks on the control plane (phoenix/control_guard.hpp) by real nodes over 127.0.0.1: each test runs one
// and asserts its outcome. The attacked node runs in a child process (a kill that got through would end it, and
// the test sees it by its PID); attackers are nodes of the test process, or a bare overlay that sends whatever
// packets it likes with the cluster key (a key holder running its own code).
#include <doctest/doctest.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <phoenix/config.hpp>
#include <phoenix/node.hpp>
#include <thread>

#include "overlay/links/cluster_key.hpp"
#include "overlay/overlay.hpp"
#include "phoenix/control.hpp"
#include "phoenix/control_key_file.hpp"
#include "phoenix/message_log.hpp"
#include "support/nodes.hpp"
#include "support/temp_dir.hpp"

using namespace std::chrono_literals;
using phoenix::Node;
using phoenix::vp_t;
using phoenix::test::L;

namespace {

using steady = std::chrono::steady_clock;

// The value of a key in a `status` reply ("" if absent).
std::string field(const std::string& status, const std::string& key) {
  const auto at = status.find("\n" + key + "=");
  if (at == std::string::npos) return "";
  const auto start = at + key.size() + 2;
  return status.substr(start, status.find('\n', start) - start);
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::uint64_t wall_ms() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
}

// A node in a child process. It assumes [0, L), reports "READY <endpoint> <resource name>" on its report pipe
// and "LEAVE" for every leave its application is asked for, and finalizes when the test closes its control
// pipe (or after two minutes). Its log goes to a file. Killed by its PID at the end if still there.
class node_process {
 public:
  node_process(const phoenix::Config& config, const std::filesystem::path& log, const char* log_in = nullptr) {
    REQUIRE_MESSAGE(threads() == 1, "fork needs a single-threaded test process");
    int report[2], control[2];
    REQUIRE(::pipe2(report, O_CLOEXEC) == 0);
    REQUIRE(::pipe2(control, O_CLOEXEC) == 0);
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      ::close(report[0]);
      ::close(control[1]);
      const int err = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (err >= 0) ::dup2(err, STDERR_FILENO);
      run_child(config, log_in, report[1], control[0]);
    }
    ::close(report[1]);
    ::close(control[0]);
    report_fd_ = report[0];
    control_fd_ = control[1];
    const auto ready = wait_line("READY ", 20s);
    REQUIRE_MESSAGE(ready, "the node process did not start: " << log_text(log));
    const auto space = ready->find(' ', 6);
    endpoint_ = ready->substr(6, space - 6);
    name_ = std::stoull(ready->substr(space + 1));
  }
  ~node_process() {
    ::close(control_fd_);
    ::close(report_fd_);
    if (!reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  node_process(const node_process&) = delete;
  node_process& operator=(const node_process&) = delete;

  const std::string& endpoint() const { return endpoint_; }
  vp_t name() const { return name_; }
  bool alive() {
    if (reaped_) return false;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) != pid_) return true;
    reaped_ = true;
    status_ = status;
    return false;
  }
  // True once the process ended within `limit`; status() then says how.
  bool wait_exit(std::chrono::milliseconds limit) {
    const auto deadline = steady::now() + limit;
    while (alive() && steady::now() < deadline) std::this_thread::sleep_for(10ms);
    return !alive();
  }
  int status() const { return status_; }
  std::optional<std::string> wait_line(const std::string& prefix, std::chrono::milliseconds limit) {
    const auto deadline = steady::now() + limit;
    for (;;) {
      for (auto nl = buffer_.find('\n'); nl != std::string::npos; nl = buffer_.find('\n')) {
        std::string line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        if (line.rfind(prefix, 0) == 0) return line;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady::now());
      if (left.count() <= 0) return std::nullopt;
      pollfd p{report_fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char buf[512];
      const auto n = ::read(report_fd_, buf, sizeof buf);
      if (n <= 0) return std::nullopt;
      buffer_.append(buf, static_cast<std::size_t>(n));
    }
  }
  static std::string log_text(const std::filesystem::path& log) {
    std::ifstream in(log);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

 private:
  static std::size_t threads() {
    return static_cast<std::size_t>(std::distance(std::filesystem::directory_iterator("/proc/self/task"), {}));
  }
  static void say(int fd, const std::string& line) { (void)!::write(fd, line.data(), line.size()); }
  [[noreturn]] static void run_child(const phoenix::Config& config, const char* log_in, int report, int control) {
    {
      Node node(config);
      if (node.initialize("tcp://127.0.0.1:0", log_in)) ::_exit(2);
      say(report, "READY " + node.local_port() + " " + std::to_string(node.resource_name()) + "\n");
      const auto deadline = steady::now() + 120s;
      while (steady::now() < deadline) {
        pollfd p{control, POLLIN, 0};
        if (::poll(&p, 1, 20) > 0) break;  // closed: the test is done with this node
        if (node.take_control_request().kind == Node::ControlRequest::Kind::leave) say(report, "LEAVE\n");
      }
      node.finalize();
    }
    ::_exit(0);
  }

  pid_t pid_ = -1;
  int report_fd_ = -1;
  int control_fd_ = -1;
  std::string buffer_;
  std::string endpoint_;
  vp_t name_ = 0;
  bool reaped_ = false;
  int status_ = 0;
};

// A cluster: its key, the controller's key pair, and another controller's (whom the nodes do not obey).
struct cluster {
  phoenix::test::temp_dir dir;
  std::string key = dir.make_key();
  phoenix::test::temp_dir::controller_keys controller = dir.make_controller_keys();
  phoenix::test::temp_dir::controller_keys stranger = dir.make_controller_keys("stranger");

  // A node that obeys the controller and assumes [0, L).
  phoenix::Config target(const std::string& name) const {
    auto c = phoenix::test::node_config(name, key, L);
    c.control_key_file = controller.public_file;
    c.assume = {{0, L}};
    return c;
  }
  // A node of the test process: a key holder, signing with `signer` (may be empty).
  phoenix::Config sender(const std::string& name, const std::string& signer) const {
    auto c = phoenix::test::node_config(name, key, L);
    c.controller_key_file = signer;
    return c;
  }
  phoenix::controller_key controller_private() const {
    auto k = phoenix::load_controller_key(controller.private_file, true);
    REQUIRE_MESSAGE(k.error.empty(), k.error);
    return k.key;
  }
};

// Links `n` to the node process and waits until it reaches it (its status is answered).
void link(Node& n, node_process& target) {
  REQUIRE_FALSE(n.initialize("tcp://127.0.0.1:0"));
  REQUIRE_FALSE(n.add_port(target.endpoint()));
  REQUIRE(phoenix::test::wait_for([&] { return n.control(target.name(), "status", 200ms).has_value(); }, 10s));
}

// The node process still runs and answers status.
void check_still_running(Node& asker, node_process& target) {
  CHECK(target.alive());
  const auto status = asker.control(target.name(), "status", 5s);
  REQUIRE(status);
  CHECK(field("\n" + status->text, "resource") == std::to_string(target.name()));
}

// A key holder running its own code: a bare overlay that sends any control packet, and collects replies.
class raw_sender {
 public:
  explicit raw_sender(const cluster& c) {
    auto key = phoenix::overlay::load_cluster_key(c.key);
    REQUIRE(key.is_ok());
    phoenix::overlay::overlay_config oc;
    oc.name = "raw";
    oc.space_size = L;
    oc.cluster_key = key.key;
    oc.retry_interval = 50ms;
    overlay_ = std::make_unique<phoenix::overlay::overlay>(io_, oc, self, [this](phoenix::overlay::packet&& p) {
      if (p.tag != phoenix::control_tag) return;
      std::lock_guard lock(mu_);
      if (auto r = phoenix::decode_control(p.body)) replies_.push_back(std::move(*r));
    });
    std::string bound;
    REQUIRE_FALSE(overlay_->listen("tcp://127.0.0.1:0", bound));
    thread_ = std::thread([this] {
      auto work = asio::make_work_guard(io_);
      io_.run();
    });
  }
  ~raw_sender() {
    io_.stop();
    thread_.join();
  }
  template <class F>
  auto on_io(F f) {
    std::packaged_task<decltype(f())()> task(std::move(f));
    auto result = task.get_future();
    asio::post(io_, [&task] { task(); });
    return result.get();
  }
  void link(node_process& target) {
    REQUIRE_FALSE(on_io([&] { return overlay_->add_port(target.endpoint()); }));
    REQUIRE(phoenix::test::wait_for([&] { return on_io([&] { return overlay_->can_reach(target.name()); }); },
                                    10s));
  }
  // Sends the request to `dest` and waits for the reply to it.
  std::optional<phoenix::control_packet> ask(vp_t dest, const phoenix::control_packet& request) {
    on_io([&] {
      phoenix::overlay::packet p;
      p.dest = dest;
      p.tag = phoenix::control_tag;
      p.body = phoenix::encode_control(request);
      overlay_->send_unbounded(std::move(p));
      return 0;
    });
    std::optional<phoenix::control_packet> reply;
    phoenix::test::wait_for(
        [&] {
          std::lock_guard lock(mu_);
          for (auto it = replies_.begin(); it != replies_.end(); ++it) {
            if (it->id != request.id) continue;
            reply = std::move(*it);
            replies_.erase(it);
            return true;
          }
          return false;
        },
        10s);
    return reply;
  }
  static constexpr vp_t self = L + 777;

 private:
  asio::io_context io_;
  std::unique_ptr<phoenix::overlay::overlay> overlay_;
  std::thread thread_;
  std::mutex mu_;
  std::vector<phoenix::control_packet> replies_;
};

phoenix::control_packet signed_request(const phoenix::controller_key& key, std::uint64_t id, std::string text,
                                       vp_t target, std::uint8_t nonce) {
  phoenix::control_packet p{phoenix::control_packet::kind::request, true, id, std::move(text), std::nullopt};
  phoenix::control_nonce n{};
  n[0] = static_cast<std::byte>(nonce);
  n[1] = static_cast<std::byte>(id);
  key.seal(p, target, wall_ms(), n);
  return p;
}

}  // namespace

TEST_CASE("control plane: kill from a cluster key holder without the controller key does nothing") {
  cluster c;
  node_process target(c.target("t"), c.dir / "t.log");
  Node unsigned_sender(c.sender("u", ""));
  Node stranger(c.sender("s", c.stranger.private_file));
  link(unsigned_sender, target);
  link(stranger, target);

  const auto bare = unsigned_sender.control(target.name(), "kill", 5s);
  REQUIRE(bare);
  CHECK_FALSE(bare->ok);
  CHECK(contains(bare->text, "unsigned request"));
  const auto forged = stranger.control(target.name(), "kill", 5s);
  REQUIRE(forged);
  CHECK_FALSE(forged->ok);
  CHECK(contains(forged->text, "does not verify"));
  for (const char* verb : {"leave", "suspend /tmp/x", "log 10"}) {
    const auto r = stranger.control(target.name(), verb, 5s);
    REQUIRE(r);
    CHECK_MESSAGE(!r->ok, verb);
  }
  // A verb behind white space the node's parser skips is guarded all the same.
  for (const char* verb : {"\rkill", "\vkill", "\f leave"}) {
    const auto r = unsigned_sender.control(target.name(), verb, 5s);
    REQUIRE(r);
    CHECK_MESSAGE(!r->ok, verb);
  }
  check_still_running(unsigned_sender, target);
  CHECK_FALSE(target.wait_line("LEAVE", 100ms));
  CHECK(contains(node_process::log_text(c.dir / "t.log"), "refused a control request"));
}

TEST_CASE("control plane: kill addressed to a virtual node the node assumes does nothing, even when signed") {
  cluster c;
  node_process target(c.target("t"), c.dir / "t.log");
  // Signed by the controller for the node's resource name, but sent to virtual node 5, which the node assumes.
  raw_sender raw(c);
  raw.link(target);
  const auto reply = raw.ask(5, signed_request(c.controller_private(), 1, "kill", target.name(), 1));
  REQUIRE(reply);
  CHECK_FALSE(reply->ok);
  CHECK(contains(reply->text, "resource name, not to a virtual node"));
  Node asker(c.sender("a", ""));
  link(asker, target);
  check_still_running(asker, target);
}

TEST_CASE("control plane: a signed request replayed does nothing") {
  cluster c;
  node_process target(c.target("t"), c.dir / "t.log");
  raw_sender raw(c);
  raw.link(target);
  const auto leave = signed_request(c.controller_private(), 7, "leave", target.name(), 1);
  const auto first = raw.ask(target.name(), leave);
  REQUIRE(first);
  CHECK(first->ok);
  REQUIRE(target.wait_line("LEAVE", 5s));
  const auto again = raw.ask(target.name(), leave);  // the same bytes, as captured on the way
  REQUIRE(again);
  CHECK_FALSE(again->ok);
  CHECK(contains(again->text, "replay"));
  CHECK_FALSE(target.wait_line("LEAVE", 300ms));
  CHECK(target.alive());
}

TEST_CASE("control plane: a signed request for another node's resource name does nothing") {
  cluster c;
  node_process target(c.target("t"), c.dir / "t.log");
  raw_sender raw(c);
  raw.link(target);
  // A kill the controller signed for some other node (or an earlier incarnation of this one), sent here.
  const auto reply = raw.ask(target.name(), signed_request(c.controller_private(), 3, "kill", target.name() + 1, 1));
  REQUIRE(reply);
  CHECK_FALSE(reply->ok);
  CHECK(contains(reply->text, "signed for node " + std::to_string(target.name() + 1)));
  Node asker(c.sender("a", ""));
  link(asker, target);
  check_still_running(asker, target);
}

TEST_CASE("control plane: a kill record in a message log does nothing at initialize") {
  cluster c;
  // Records a finalized node could never have written: kills to virtual node 3, unsigned and signed, and to a
  // resource name. The next incarnation assumes 3.
  std::vector<phoenix::overlay::packet> records;
  const auto key = c.controller_private();
  for (int i = 0; i < 3; ++i) {
    phoenix::overlay::packet p;
    p.dest = i == 2 ? L + 99 : 3;
    p.source = L + 5;
    p.tag = phoenix::control_tag;
    p.body = phoenix::encode_control(
        i == 0 ? phoenix::control_packet{phoenix::control_packet::kind::request, true, 1, "kill", std::nullopt}
               : signed_request(key, 2, "kill", p.dest, static_cast<std::uint8_t>(i)));
    records.push_back(std::move(p));
  }
  const auto log_file = c.dir / "t.msglog";
  REQUIRE(phoenix::write_message_log(log_file, records) == "");

  node_process target(c.target("t"), c.dir / "t.log", log_file.c_str());
  Node asker(c.sender("a", ""));
  link(asker, target);
  check_still_running(asker, target);
  CHECK(contains(node_process::log_text(c.dir / "t.log"), "ignored 3 records of the runtime's own protocols"));
}

TEST_CASE("control plane: a kill or leave signed by the controller for the node is carried out") {
  cluster c;
  node_process target(c.target("t"), c.dir / "t.log");
  Node controller(c.sender("ctl", c.controller.private_file));
  link(controller, target);
  const auto leave = controller.control(target.name(), "leave", 5s);
  REQUIRE(leave);
  CHECK(leave->ok);
  CHECK(target.wait_line("LEAVE", 5s));
  const auto log = controller.control(target.name(), "log 20", 5s);
  REQUIRE(log);
  CHECK(log->ok);
  controller.control(target.name(), "kill", 2s);  // no reply: the node is gone
  REQUIRE(target.wait_exit(10s));
  CHECK(WIFSIGNALED(target.status()));
  CHECK(WTERMSIG(target.status()) == SIGKILL);
}
