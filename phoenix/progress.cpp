#include "phoenix/progress.hpp"

namespace phoenix {

progress_engine::progress_engine() : work_(asio::make_work_guard(io_)) {}

progress_engine::~progress_engine() { stop_background(); }

void progress_engine::start_background() {
  stop_ = false;
  background_ = std::thread([this] { background_loop(); });
}

void progress_engine::stop_background() {
  if (!background_.joinable()) return;
  stop_ = true;
  asio::post(io_, [] {});  // wake it if it blocks in the event loop
  background_.join();
}

void progress_engine::acquire() {
  app_wanting_.fetch_add(1, std::memory_order_acq_rel);
  if (!token_.try_lock()) {
    asio::post(io_, [] {});  // the holder may block in epoll_wait: make it return
    token_.lock();
  }
  app_wanting_.fetch_sub(1, std::memory_order_acq_rel);
}

void progress_engine::release(clock::time_point now) {
  app_left_at_.store(now.time_since_epoch().count(), std::memory_order_relaxed);
  token_.unlock();
}

bool progress_engine::drive_until(const std::function<bool()>& done, clock::time_point deadline) {
  acquire();
  const auto started = clock::now();
  bool ok = done();
  const bool spin = !ok && deadline > started && should_spin();
  auto spin_until = spin ? started + spin_time : started;
  bool direct = spin && direct_.begin && direct_.begin();
  settle_direct(direct);
  unsigned looks = 0;
  // Even a deadline already passed (try_recv, poll) gives the network one non-blocking turn: an application that
  // only ever polls between pieces of work keeps the background thread away (linger_time), so without this turn
  // its links, handshakes and migrations would stand still until it blocks.
  bool turned = false;
  unsigned empty_polls = 0;
  while (!ok) {
    const auto now = clock::now();
    if (now >= deadline) {
      if (turned) break;
      turned = true;
      ok = poll_some(done).done || done();
      continue;
    }
    turned = true;
    bool busy = false;  // handlers ran: traffic is flowing
    if (app_wanting_.load(std::memory_order_relaxed) > 0) {
      // Another application thread wants the token (say, to send): let it in, then carry on. It may give the
      // link read directly back to the event loop meanwhile, or read it directly itself.
      release();
      std::this_thread::yield();
      acquire();
      direct = direct && direct_open_;
      settle_direct(direct);
    } else if (now < spin_until) {
      std::size_t ran = 0;
      if (direct && looks++ % event_loop_every != 0) {
        ran = direct_.read();
        if (ran == direct_reads::stopped) {
          direct = false;
          settle_direct(direct);
          continue;
        }
        if (ran == 0) {
          note_empty(empty_polls);
          continue;  // nothing arrived: done() cannot have changed
        }
      } else {
        const auto turn = poll_some(done);
        if (turn.done) {
          ok = true;
          break;  // done() took what it waited for: asking again would take the next one
        }
        ran = turn.ran;
        if (ran == 0) note_empty(empty_polls);
      }
      busy = ran > 0;
    } else {
      direct = false;  // blocking: the event loop must read every link again
      settle_direct(direct);
      io_.run_one_for(std::min<clock::duration>(deadline - now, std::chrono::milliseconds(20)));
    }
    ok = done();
    // While handlers keep running (a large message streaming in, the peer draining what we sent), keep
    // spinning: blocking would make every next chunk pay for a wake-up. Counted from when the handlers
    // finished: one batch can take longer than busy_spin_time (a large body written in slices by a write
    // completion), and counting from before it would end the spin at once.
    if (busy && !ok) spin_until = std::min(clock::now() + busy_spin_time, started + busy_spin_limit);
  }
  // The link read directly goes back to the event loop only when the loop next runs (direct_open_ stays
  // set): the thread that found its message returns to the application at once, and one that comes back to
  // wait keeps reading.
  const auto ended = clock::now();
  if (spin) spin_misses_ = ok && ended <= spin_until ? 0 : std::min(spin_misses_ + 1, max_spin_misses);
  release(ended);
  return ok;
}

// Whether the link read directly stays so (`direct`: this thread reads it), else gives it back to the event
// loop, which this thread may run next. Called holding the token whenever `direct` may have changed:
// direct_open_ tells every thread that takes the token after this one.
void progress_engine::settle_direct(bool direct) {
  if (direct_open_ && !direct) direct_.end();
  direct_open_ = direct;
}

// Nothing was ready: now and then yield, in case the thread we wait for (the peer process, say) shares this
// core. Not every time: a yield is a system call (1-2 us on a virtual machine), and one between every look
// delays noticing the message by that much when the peer has a core of its own.
void progress_engine::note_empty(unsigned& empty_polls) {
  if (++empty_polls % yield_every == 0) std::this_thread::yield();
}

// Spinning pays when the awaited message comes within spin_time. When replies take longer (through an SSH
// gateway, a relay, a peer that computes first), the spinning thread only takes a core from the processes that
// produce the reply -- on a 2-CPU machine, from sshd and the peer node. So after max_spin_misses waits in a row
// that spinning did not end, drive_until blocks at once, except on every spin_probe_every-th wait, which spins
// to find out whether replies have become fast again. Only spins count: a blocked wait says nothing about how
// soon the reply came, since it includes the wake-up.
bool progress_engine::should_spin() {
  if (spin_misses_ < max_spin_misses) return true;
  return ++spin_probe_ % spin_probe_every == 0;
}

// poll() would run until nothing is ready, which under a flood of arriving messages is never: each read
// completes at once and starts the next. A bounded batch keeps the caller's deadline and done() honest.
// done() is asked after every handler, so the one that delivered the awaited message is the last one run: no
// further epoll_wait (a system call, 1-2 us on a virtual machine) to find nothing more ready.
progress_engine::polled progress_engine::poll_some(const std::function<bool()>& done) {
  polled p;
  while (p.ran < poll_batch && io_.poll_one()) {
    ++p.ran;
    if (done && done()) {
      p.done = true;
      break;
    }
  }
  return p;
}

// While an application thread keeps using the event loop, each look costs this thread a wake-up and the
// application's core a context switch (on 2 cores both run application threads). So the naps between looks
// double while the application stays, up to max_nap, and shrink back to the linger once this thread drives.
void progress_engine::background_loop() {
  clock::duration nap = linger_time;  // never shorter than what is left of the linger
  const auto napped = [&] {
    std::this_thread::sleep_for(nap);
    nap = std::min<clock::duration>(nap * 2, max_nap);
  };
  while (!stop_.load(std::memory_order_relaxed)) {
    const auto left = clock::time_point(clock::duration(app_left_at_.load(std::memory_order_relaxed)));
    const bool app_stays =
        app_wanting_.load(std::memory_order_relaxed) > 0 || clock::now() - left < linger_time;
    if (app_stays || !token_.try_lock()) {
      napped();
      continue;
    }
    nap = linger_time;
    background_driving_.store(true, std::memory_order_release);
    settle_direct(false);  // the event loop reads every link again
    if (io_.run_one_for(std::chrono::milliseconds(100))) poll_some();  // a batch of what is ready, then let go
    background_driving_.store(false, std::memory_order_release);
    token_.unlock();
  }
}

}  // namespace phoenix
