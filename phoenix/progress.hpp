// progress.hpp — who runs a node's event loop, and when.
//
// A node's networking and routing state lives on one asio::io_context and is touched only by the thread that
// holds the node's progress token, so it needs no locks (the overlay is single-threaded by construction).
// Two kinds of threads take the token:
//
//   * an application thread inside the API. ph_send runs the send inline when the token is free (the write
//     reaches the socket before ph_send returns) and posts it otherwise. ph_recv waits by driving the event
//     loop itself: it spins for a few microseconds (unless recent spins were in vain), reading the link it
//     expects the message on directly and running the event loop's poll() now and then, then blocks in the
//     event loop's epoll_wait. An arriving message wakes the very thread that waits for it: no
//     hand-off between threads, which on this kind of machine costs 25-30 us per wake-up (MPI progress
//     engines work the same way).
//   * the node's background thread, which keeps forwarding, acknowledging and routing while the
//     application computes. It stays away while an application thread holds or wants the token, and for a
//     short linger after the application last left the API, so that a tight send/receive loop never has to
//     wake it up.
//
// An application thread that wants the token while the background thread blocks in the event loop posts an
// empty handler to wake it (one wake-up, paid only after the application was away longer than the linger).
#pragma once

#include <asio.hpp>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <limits>
#include <mutex>
#include <thread>

namespace phoenix {

class progress_engine {
 public:
  using clock = std::chrono::steady_clock;

  progress_engine();
  ~progress_engine();
  progress_engine(const progress_engine&) = delete;
  progress_engine& operator=(const progress_engine&) = delete;

  asio::io_context& io() { return io_; }

  // Direct reads (overlay::begin_direct_reads): while an application thread spins, most of its looks read the
  // link that brought the last message, with a non-blocking read, instead of asking epoll_wait which socket
  // is ready and then reading. One system call less on the way of every message: bench/socket_pingpong's
  // --spin-read shows what that is worth on this kind of machine (about 2 us one way). The first look of a
  // spin and every event_loop_every-th after it run the event loop: the completion of the write just made
  // (until it runs, the link writes nothing more), other links, timers, handlers posted by other threads.
  // Set once, before the node starts; called holding the token.
  struct direct_reads {
    std::function<bool()> begin;         // false: no link to read directly
    std::function<std::size_t()> read;   // one look; the bytes read (and handled), or stopped
    static constexpr std::size_t stopped = std::numeric_limits<std::size_t>::max();  // the loop reads now
    std::function<void()> end;
  };
  void set_direct_reads(direct_reads r) { direct_ = std::move(r); }

  void start_background();
  void stop_background();  // joins the background thread; the io_context stays usable by app threads

  // Runs f holding the token if it can be taken at once; returns false (f not run) otherwise.
  template <class F>
  bool try_run(F&& f) {
    if (!token_.try_lock()) return false;
    f();
    release();
    return true;
  }

  // Runs f holding the token and returns its result (waits for the token).
  template <class F>
  auto call(F&& f) -> decltype(f()) {
    acquire();
    struct releaser {
      progress_engine* p;
      ~releaser() { p->release(); }
    } r{this};
    return f();
  }

  // Drives the event loop until done() or the deadline; done() is evaluated holding the token, after every
  // batch of handlers. Returns done()'s last value.
  bool drive_until(const std::function<bool()>& done, clock::time_point deadline);

  // True while the background thread holds the token to wait in the event loop: whatever arrives is being
  // handled, so an application thread that only looks for messages need not take the loop over (waking that
  // thread costs 25-30 us on this kind of machine, and a compute-bound application looks often).
  bool background_driving() const { return background_driving_.load(std::memory_order_acquire); }

  // How long an application thread spins before blocking (after the last handler that ran; unless recent
  // spins were in vain: should_spin), and how long the background thread keeps away after the application
  // left the API.
  static constexpr std::chrono::microseconds spin_time{50};
  // Once handlers run (traffic is flowing), the spin goes on for busy_spin_time after the last one, up to
  // busy_spin_limit in all.
  static constexpr std::chrono::microseconds busy_spin_time{250};
  static constexpr std::chrono::microseconds busy_spin_limit{2000};
  static constexpr std::chrono::microseconds linger_time{500};
  // The longest the background thread naps between two looks while the application keeps the loop busy.
  static constexpr std::chrono::microseconds max_nap{4000};

 private:
  void acquire();
  void release(clock::time_point now = clock::now());  // `now`: when the application left the API
  void background_loop();
  bool should_spin();
  void settle_direct(bool direct);
  void note_empty(unsigned& empty_polls);
  static constexpr unsigned max_spin_misses = 4;
  static constexpr unsigned spin_probe_every = 16;
  // Runs at most poll_batch ready handlers, fewer if done() (when given) holds after one.
  struct polled {
    std::size_t ran = 0;
    bool done = false;  // done() held (and was not asked again)
  };
  polled poll_some(const std::function<bool()>& done = {});
  static constexpr std::size_t poll_batch = 64;
  static constexpr unsigned yield_every = 4;  // empty polls of a spin between two yields of the core
  static constexpr unsigned event_loop_every = 8;  // while reading directly, one look in this many polls

  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::mutex token_;
  std::atomic<int> app_wanting_{0};
  std::atomic<clock::rep> app_left_at_{0};
  std::atomic<bool> stop_{false};
  std::atomic<bool> background_driving_{false};
  std::thread background_;
  direct_reads direct_;
  // A link is read directly and was not given back (direct_.end): by the spin that holds the token, or by one
  // that let the token go (it ended, or let another thread in). Whoever runs the event loop next without
  // reading it directly gives it back first (settle_direct). Touched holding the token.
  bool direct_open_ = false;
  // Waits in a row whose spin ended without the message, and blocked waits since the last spin (should_spin);
  // touched holding the token.
  unsigned spin_misses_ = 0, spin_probe_ = 0;
};

}  // namespace phoenix
