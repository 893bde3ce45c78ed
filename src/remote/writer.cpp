#include "remote/writer.h"

#include <openssl/evp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "common/clock.h"
#include "net/http_client.h"
#include "remote/filter.h"
#include "remote/wire.h"

namespace gpufleet::remote {

namespace fs = std::filesystem;

namespace {

constexpr int64_t kFirstBackoffMs = 30;
constexpr int64_t kMaxBackoffMs = 5'000;
constexpr int64_t kNever = INT64_MIN;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// FNV-1a: a series' shard must not change between runs (a cursor records shards).
uint64_t Hash(std::string_view uuid, Field field) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : uuid) h = (h ^ c) * 1099511628211ull;
  return (h ^ static_cast<uint64_t>(field)) * 1099511628211ull;
}

std::string MetricName(Field f) {
  const auto& info = Info(f);
  if (!info.dcgm_name.empty()) return std::string(info.dcgm_name);
  return "gpufleet_gpu_" + std::string(info.name);
}

std::string Base64(std::string_view in) {
  std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(in.data()),
                          static_cast<int>(in.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

}  // namespace

struct SeriesState {
  int64_t last_sent = kNever;  // the newest time a receiver took (this run)
  uint64_t generation = 0;     // of the labels `encoded` was made from; 0: none yet
  bool pass = false;           // the receiver's filters let it through
  bool ended = false;          // its staleness marker is sent: the GPU left the fleet
  std::string encoded;         // its labels, encoded (wire.h)
};
struct GpuState {
  std::array<SeriesState, kFieldCount> fields;
};

// One request's worth: series in the order they first appear, their samples in order.
struct Shard {
  std::vector<WireSeries> series;
  std::vector<SeriesState*> states;
  std::unordered_map<SeriesState*, size_t> index;
  size_t samples = 0;
};

struct RemoteWriter::Receiver {
  ReceiverConfig config;
  net::TlsContext tls;
  std::string auth;  // the Authorization header's value, or ""
  std::vector<Filter> filters;
  std::string cursor_path;
  Position pos;  // guarded by mu: where the next read starts
  // Within the read that starts at `pos`: shard i has taken its samples numbered below
  // shard_done[i] (a read interrupted by a stop or a crash).
  std::vector<uint64_t> shard_done;
  std::unordered_map<std::string, GpuState> gpus;  // Run's thread only
  std::thread thread;
  mutable std::mutex mu;
  ReceiverStatus status;  // guarded by mu (pending is computed)

  std::vector<Shard> Split(const QueueRead& read, const GpuLabels* labels, uint64_t generation,
                           const std::vector<uint64_t>& done);
  bool Send(Shard& shard, const std::function<bool(int64_t)>& wait);

  void SaveCursor() {  // caller holds mu
    std::string tmp = cursor_path + ".tmp";
    {
      std::ofstream out(tmp, std::ios::trunc);
      out << "v1 " << pos.segment << ' ' << pos.offset << ' ' << pos.seq << ' '
          << shard_done.size();
      for (auto d : shard_done) out << ' ' << d;
      out << '\n';
      if (!out) return;
    }
    std::error_code ec;
    fs::rename(tmp, cursor_path, ec);
  }
  bool LoadCursor() {
    std::ifstream in(cursor_path);
    std::string v;
    size_t shards = 0;
    Position p;
    if (!(in >> v >> p.segment >> p.offset >> p.seq >> shards) || v != "v1") return false;
    std::vector<uint64_t> done(shards);
    for (auto& d : done) {
      if (!(in >> d)) return false;
    }
    pos = p;
    // Shards are by series hash modulo their count: another count cannot use these.
    shard_done = shards == static_cast<size_t>(config.shards)
                     ? done
                     : std::vector<uint64_t>(static_cast<size_t>(config.shards), 0);
    return true;
  }
};

Result<std::unique_ptr<RemoteWriter>> RemoteWriter::Open(RemoteWriteOptions options,
                                                         LabelSource labels) {
  QueueOptions q{(fs::path(options.dir) / "queue").string(), options.window_bytes,
                 options.segment_bytes};
  auto queue = Queue::Open(q);
  if (!queue.ok()) return queue.error();
  std::unique_ptr<RemoteWriter> w(
      new RemoteWriter(std::move(options), std::move(labels), std::move(queue.value())));
  std::vector<std::string> names;
  for (auto config : w->options_.receivers) {
    GF_TRY(Validate(config));
    if (std::find(names.begin(), names.end(), config.name) != names.end()) {
      return MakeError(ErrorCode::kInvalidArgument, "remote_write: two receivers are named " +
                                                        config.name + ": give one a `name`");
    }
    names.push_back(config.name);
    auto r = std::make_unique<Receiver>();
    r->config = config;
    if (config.url.rfind("https://", 0) == 0) {
      net::TlsClientOptions tls;
      tls.ca_file = config.ca_file;
      if (config.ca_file.empty()) {
        auto d = net::DefaultClientContext();
        if (!d.ok()) return d.error();
        r->tls = d.value();
      } else {
        auto c = net::MakeClientContext(tls);
        if (!c.ok()) return c.error();
        r->tls = c.value();
      }
    }
    if (!config.bearer_token.empty()) r->auth = "Bearer " + config.bearer_token;
    if (!config.basic_user.empty() || !config.basic_password.empty()) {
      r->auth = "Basic " + Base64(config.basic_user + ":" + config.basic_password);
    }
    for (const auto& m : config.match) r->filters.push_back(CompileFilter(m).value());
    std::string file;
    for (char c : config.name) file += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    r->cursor_path = (fs::path(w->options_.dir) / (file + ".cursor")).string();
    r->shard_done.assign(static_cast<size_t>(config.shards), 0);
    if (!r->LoadCursor()) r->pos = w->queue_->End();  // a new receiver starts from now
    r->status.name = config.name;
    r->status.url = config.url;
    r->status.state = "idle";
    w->receivers_.push_back(std::move(r));
  }
  return w;
}

RemoteWriter::RemoteWriter(RemoteWriteOptions options, LabelSource labels,
                           std::unique_ptr<Queue> queue)
    : options_(std::move(options)), source_(std::move(labels)), queue_(std::move(queue)) {}

RemoteWriter::~RemoteWriter() { Stop(); }

void RemoteWriter::Start() {
  RefreshLabels();
  label_thread_ = std::thread([this] { LabelLoop(); });
  for (auto& r : receivers_) {
    r->thread = std::thread([this, rp = r.get()] { Run(*rp); });
  }
}

void RemoteWriter::Stop() {
  {
    std::lock_guard lock(stop_mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (label_thread_.joinable()) label_thread_.join();
  for (auto& r : receivers_) {
    if (r->thread.joinable()) r->thread.join();
  }
}

void RemoteWriter::Stored(const std::vector<std::string>& uuids,
                          const std::vector<StoredPoint>& points) {
  {
    std::lock_guard lock(seen_mu_);
    std::vector<std::array<int64_t, kFieldCount>*> by_gpu(uuids.size(), nullptr);
    for (const auto& p : points) {
      auto*& seen = by_gpu[p.gpu];
      if (!seen) {
        auto [it, fresh] = seen_.try_emplace(uuids[p.gpu]);
        if (fresh) it->second.fill(kNever);
        seen = &it->second;
      }
      auto& t = (*seen)[static_cast<size_t>(p.field)];
      t = std::max(t, p.t);
    }
  }
  if (Status s = queue_->Append(uuids, points); !s.ok()) {
    spdlog::error("remote write: {}", s.error().message);
  }
}

void RemoteWriter::RefreshLabels() {
  const auto walked_at = std::chrono::steady_clock::now();  // it sees every GPU known before
  auto now = source_ ? source_() : nullptr;
  if (!now) now = std::make_shared<const GpuLabels>();
  {
    std::lock_guard lock(labels_mu_);
    labels_at_ = walked_at;
    if (labels_ && *labels_ == *now) return;
    labels_ = now;
    ++labels_generation_;
    spdlog::debug("remote write: labels of {} GPUs (generation {})", now->size(),
                  labels_generation_);
  }
  // GPUs that left the fleet: a staleness marker ends each series they had.
  std::vector<std::string> uuids;
  std::vector<StoredPoint> points;
  {
    std::lock_guard lock(seen_mu_);
    const int64_t t_now = NowMs();
    for (auto it = seen_.begin(); it != seen_.end();) {
      if (now->count(it->first)) {
        ++it;
        continue;
      }
      auto gpu = static_cast<uint32_t>(uuids.size());
      uuids.push_back(it->first);
      for (size_t f = 0; f < kFieldCount; ++f) {
        if (it->second[f] == kNever) continue;
        points.push_back(
            {gpu, static_cast<Field>(f), std::max(t_now, it->second[f] + 1), StaleNaN()});
      }
      it = seen_.erase(it);
    }
    if (!points.empty()) {
      if (Status s = queue_->Append(uuids, points); !s.ok()) {
        spdlog::error("remote write: staleness markers: {}", s.error().message);
      }
    }
  }
  if (!uuids.empty())
    spdlog::info("remote write: {} GPUs left the fleet: their series end", uuids.size());
}

void RemoteWriter::LabelLoop() {
  std::unique_lock lock(stop_mu_);
  while (!stopping_) {
    stop_cv_.wait_for(lock, std::chrono::milliseconds(options_.labels_every_ms));
    if (stopping_) break;
    lock.unlock();
    RefreshLabels();
    lock.lock();
  }
}

std::vector<ReceiverStatus> RemoteWriter::Receivers() const {
  const uint64_t end = queue_->End().seq;
  std::vector<ReceiverStatus> out;
  for (const auto& r : receivers_) {
    std::lock_guard lock(r->mu);
    ReceiverStatus s = r->status;
    s.pending = end > r->pos.seq ? end - r->pos.seq : 0;
    out.push_back(std::move(s));
  }
  return out;
}

// The fleet's labels for a read: read again when the read has a GPU they lack and they are
// older than it (a GPU that has just joined); a GPU still missing then has left the fleet.
std::pair<std::shared_ptr<const GpuLabels>, uint64_t> RemoteWriter::LabelsFor(
    const QueueRead& read, std::chrono::steady_clock::time_point read_at) {
  for (int attempt = 0;; ++attempt) {
    std::shared_ptr<const GpuLabels> labels;
    uint64_t generation = 0;
    std::chrono::steady_clock::time_point at;
    {
      std::lock_guard lock(labels_mu_);
      labels = labels_;
      generation = labels_generation_;
      at = labels_at_;
    }
    bool missing = false;
    for (const auto& uuid : read.uuids) {
      if (!labels || !labels->count(uuid)) {
        missing = true;
        break;
      }
    }
    if (!missing || at > read_at || attempt > 0) return {labels, generation};
    RefreshLabels();
  }
}

bool RemoteWriter::Wait(int64_t ms) {
  std::unique_lock lock(stop_mu_);
  stop_cv_.wait_for(lock, std::chrono::milliseconds(ms), [&] { return stopping_; });
  return !stopping_;
}

// A read's samples by shard, each series once with its samples in order: what the receiver has
// not taken yet and its selectors let through.
std::vector<Shard> RemoteWriter::Receiver::Split(const QueueRead& read, const GpuLabels* labels,
                                                 uint64_t generation,
                                                 const std::vector<uint64_t>& done) {
  const auto shards = static_cast<size_t>(config.shards);
  std::vector<Shard> work(shards);
  uint32_t last_uuid = UINT32_MAX;
  GpuState* gpu = nullptr;
  const Labels* gpu_labels = nullptr;
  for (const auto& s : read.samples) {
    const std::string& uuid = read.uuids[s.uuid];
    size_t shard = Hash(uuid, s.field) % shards;
    if (s.seq < done[shard]) continue;  // taken before this read was interrupted
    if (s.uuid != last_uuid) {
      last_uuid = s.uuid;
      gpu = &gpus[uuid];
      gpu_labels = nullptr;
      if (labels) {
        if (auto it = labels->find(uuid); it != labels->end()) gpu_labels = &it->second;
      }
    }
    SeriesState& st = gpu->fields[static_cast<size_t>(s.field)];
    if (gpu_labels) {
      if (st.generation != generation || st.encoded.empty() || st.ended) {
        Labels l = *gpu_labels;
        std::string name = MetricName(s.field);
        st.pass =
            filters.empty() || std::any_of(filters.begin(), filters.end(),
                                           [&](const Filter& f) { return f.Matches(name, l); });
        l["__name__"] = name;
        st.encoded = EncodeLabels(l);
        st.generation = generation;
        st.ended = false;
      }
    } else {
      // A GPU the fleet no longer lists: what it stored before it left goes under the labels
      // it had, up to its staleness marker; after that (a retired node's agent still running),
      // nothing, as labels of its own would start other series.
      if (st.encoded.empty() || st.ended) continue;
      if (IsStaleNaN(s.v)) st.ended = true;
    }
    if (!st.pass || s.t <= st.last_sent) continue;
    auto& p = work[shard];
    auto [it, fresh] = p.index.try_emplace(&st, p.series.size());
    if (fresh) {
      p.series.push_back({&st.encoded, {}});
      p.states.push_back(&st);
    }
    double v = IsStaleNaN(s.v) ? s.v : s.v * Info(s.field).metrics_scale;
    p.series[it->second].samples.push_back({s.t, v});
    ++p.samples;
  }
  return work;
}

// One shard's request, sent until it is taken or refused; false when the writer stopped while
// it waited to send it again.
bool RemoteWriter::Receiver::Send(Shard& p, const std::function<bool(int64_t)>& wait) {
  net::HttpCall call;
  call.method = "POST";
  call.url = config.url;
  call.body = Compress(EncodeWriteRequest(p.series));
  call.timeout_ms = config.timeout_ms;
  call.tls = tls;
  call.max_body_bytes = 1 << 20;
  call.headers = {{"Content-Type", "application/x-protobuf"},
                  {"Content-Encoding", "snappy"},
                  {"User-Agent", "gpufleet/" GPUFLEET_VERSION},
                  {"X-Prometheus-Remote-Write-Version", "0.1.0"}};
  if (!auth.empty()) call.headers.emplace_back("Authorization", auth);
  int64_t backoff = kFirstBackoffMs;
  for (;;) {
    auto res = net::Send(call);
    const int code = res.ok() ? res->status : 0;
    std::unique_lock lock(mu);
    ++status.requests;
    if (code >= 200 && code < 300) {
      status.sent += p.samples;
      status.last_error.clear();
      status.state = "sending";
      status.last_sent_ms = NowMs();
      break;
    }
    std::string why = res.ok() ? "HTTP " + std::to_string(code) + ": " + res->body.substr(0, 200)
                               : res.error().message;
    while (!why.empty() && (why.back() == '\n' || why.back() == '\r')) why.pop_back();
    status.last_error = why;
    status.last_error_ms = NowMs();
    if (code >= 400 && code < 500 && code != 429) {
      // Refused for what it is: sending it again cannot help.
      status.dropped += p.samples;
      spdlog::warn("remote write {}: {} samples refused: {}", config.name, p.samples, why);
      break;
    }
    status.failed += p.samples;
    ++status.retries;
    status.state = "retrying";
    lock.unlock();
    if (!wait(backoff)) return false;
    backoff = std::min(backoff * 2, kMaxBackoffMs);
  }
  int64_t newest = 0;
  for (size_t i = 0; i < p.series.size(); ++i) {
    p.states[i]->last_sent = p.series[i].samples.back().t;
    newest = std::max(newest, p.states[i]->last_sent);
  }
  std::lock_guard lock(mu);
  status.newest_sent_sample_ms = std::max(status.newest_sent_sample_ms, newest);
  return true;
}

void RemoteWriter::Run(Receiver& r) {
  const auto shards = static_cast<size_t>(r.config.shards);
  const size_t cap = shards * r.config.max_samples_per_send;
  auto wait = [this](int64_t ms) { return Wait(ms); };
  for (;;) {
    Position at;
    std::vector<uint64_t> done;
    {
      std::lock_guard lock(r.mu);
      at = r.pos;
      done = r.shard_done;
    }
    const auto read_at = std::chrono::steady_clock::now();
    auto read = queue_->Read(at, cap);
    if (!read.ok()) {
      spdlog::error("remote write {}: {}", r.config.name, read.error().message);
      if (!Wait(1'000)) return;
      continue;
    }
    if (read->lost) {
      std::lock_guard lock(r.mu);
      r.status.dropped += read->lost;
      spdlog::warn("remote write {}: {} samples left the queue's window before they were sent",
                   r.config.name, read->lost);
    }
    auto [labels, generation] = LabelsFor(read.value(), read_at);
    auto work = r.Split(read.value(), labels.get(), generation, done);
    // The shards in parallel. Each one taken is recorded at once, so that a stop or a crash
    // before the others are taken does not send it again.
    std::atomic<bool> interrupted{false};
    auto send = [&](size_t shard) {
      if (work[shard].samples == 0) return;
      if (!r.Send(work[shard], wait)) {
        interrupted = true;
        return;
      }
      std::lock_guard lock(r.mu);
      r.shard_done[shard] = read->end.seq;
      r.SaveCursor();
    };
    std::vector<std::thread> threads;
    for (size_t i = 1; i < shards; ++i) {
      if (work[i].samples) threads.emplace_back(send, i);
    }
    send(0);
    for (auto& t : threads) t.join();
    if (interrupted) return;  // the cursor keeps the shards taken
    {
      std::lock_guard lock(r.mu);
      bool moved = !(r.pos == read->end);
      r.pos = read->end;
      r.shard_done.assign(shards, 0);
      if (moved) r.SaveCursor();
      if (r.status.state == "idle" && read->samples.empty()) r.status.state = "sending";
    }
    if (read->samples.size() < cap && !Wait(options_.batch_wait_ms)) return;
    if (read->samples.size() >= cap && !Wait(0)) return;
  }
}

}  // namespace gpufleet::remote
