#include "scrape/scraper.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "net/http_client.h"

namespace gpufleet::scrape {

Result<std::string> FetchPage(const std::string& url, int64_t timeout_ms, size_t max_body_bytes) {
  net::HttpCall call;
  call.url = url;
  call.timeout_ms = timeout_ms;
  call.max_body_bytes = max_body_bytes;
  call.headers = {{"Accept", "text/plain;version=0.0.4"}};
  auto reply = net::Send(call);
  if (!reply.ok()) return reply.error();
  if (reply->status != 200) {
    return MakeError(ErrorCode::kUnavailable, url + ": HTTP " + std::to_string(reply->status));
  }
  return std::move(reply->body);
}

struct Scraper::Impl {
  std::shared_ptr<Clock> clock;
  Sink sink;
  ScraperOptions options;
  mutable std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;
  struct Slot {
    TargetStatus status;
    int64_t next_ms = 0;
    bool busy = false;
  };
  std::map<std::string, Slot> slots;  // by node; guarded by mu
  std::vector<std::thread> workers;

  void Work() {
    std::unique_lock lock(mu);
    while (!stopping) {
      int64_t now = clock->NowMs();
      Slot* due = nullptr;
      int64_t soonest = now + 1'000;
      for (auto& [_, s] : slots) {
        if (s.busy) continue;
        if (s.next_ms <= now && (!due || s.next_ms < due->next_ms)) due = &s;
        soonest = std::min(soonest, s.next_ms);
      }
      if (!due) {
        cv.wait_for(lock, std::chrono::milliseconds(std::max<int64_t>(soonest - now, 5)));
        continue;
      }
      due->busy = true;
      ScrapeTarget target = due->status.target;
      // Keep the grid: the next scrape is an interval after this one was due, not after it ended.
      due->next_ms = std::max(due->next_ms + target.interval_ms, now);
      lock.unlock();
      TargetStatus result = Scrape(target, now);
      lock.lock();
      auto it = slots.find(target.node);
      if (it != slots.end() && it->second.status.target == target) {
        TargetStatus& st = it->second.status;
        result.scrapes = st.scrapes + 1;
        result.failures = st.failures + (result.up ? 0 : 1);
        if (!result.up) result.last_ok_ms = st.last_ok_ms;
        if (!result.up && st.up) {
          spdlog::warn("scrape {} ({}) failed: {}", target.node, target.url, result.error);
        }
        st = std::move(result);
        it->second.busy = false;
      }
    }
  }

  TargetStatus Scrape(const ScrapeTarget& target, int64_t now) {
    TargetStatus st;
    st.target = target;
    st.last_ms = now;
    auto started = std::chrono::steady_clock::now();
    auto fail = [&](const Error& e) {
      st.up = false;
      st.error = e.message;
      st.duration_ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
              .count();
      return st;
    };
    auto page = FetchPage(target.url, std::min(options.timeout_ms, target.interval_ms),
                          options.max_body_bytes);
    if (!page.ok()) return fail(page.error());
    auto samples = ParseExposition(page.value());
    if (!samples.ok()) {
      return fail(MakeError(ErrorCode::kInvalidArgument,
                            target.url + ": not a Prometheus page: " + samples.error().message));
    }
    auto reading = ReadDcgm(samples.value());
    if (!reading.ok()) {
      return fail(
          MakeError(ErrorCode::kInvalidArgument, target.url + ": " + reading.error().message));
    }
    if (auto s = sink(target, now, reading.value()); !s.ok()) return fail(s.error());
    st.up = true;
    st.last_ok_ms = now;
    st.samples = reading->samples;
    st.duration_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
            .count();
    return st;
  }
};

Scraper::Scraper(std::shared_ptr<Clock> clock, Sink sink, ScraperOptions options)
    : impl_(std::make_unique<Impl>()) {
  impl_->clock = std::move(clock);
  impl_->sink = std::move(sink);
  impl_->options = options;
  for (int i = 0; i < std::max(1, options.threads); ++i) {
    impl_->workers.emplace_back([this] { impl_->Work(); });
  }
}

Scraper::~Scraper() { Stop(); }

void Scraper::Stop() {
  {
    std::lock_guard lock(impl_->mu);
    impl_->stopping = true;
  }
  impl_->cv.notify_all();
  for (auto& w : impl_->workers) {
    if (w.joinable()) w.join();
  }
}

void Scraper::SetTargets(std::vector<ScrapeTarget> targets) {
  std::lock_guard lock(impl_->mu);
  std::map<std::string, Impl::Slot> next;
  int64_t now = impl_->clock->NowMs();
  for (auto& t : targets) {
    auto old = impl_->slots.find(t.node);
    if (old != impl_->slots.end() && old->second.status.target == t) {
      next.emplace(t.node, std::move(old->second));
      continue;
    }
    Impl::Slot slot;
    slot.status.target = t;
    slot.next_ms = now;
    next.emplace(t.node, std::move(slot));
  }
  impl_->slots = std::move(next);
  impl_->cv.notify_all();
}

std::vector<TargetStatus> Scraper::Targets() const {
  std::lock_guard lock(impl_->mu);
  std::vector<TargetStatus> out;
  for (const auto& [_, s] : impl_->slots) out.push_back(s.status);
  return out;
}

}  // namespace gpufleet::scrape
