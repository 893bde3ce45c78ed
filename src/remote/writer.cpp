#include "remote/writer.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <sstream>

#include "common/clock.h"
#include "common/crypto.h"
#include "net/http_client.h"
#include "remote/cursor.h"
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

// FNV-1a of a GPU's UUID: where its series go (shard and request) must not change between
// runs (a cursor records the requests each shard sent). All of a GPU's series go together, so
// that its labels, the same but for __name__, follow each other in a request (snappy then
// finds them in one another) and are read from one place in memory.
uint64_t Hash(std::string_view uuid) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : uuid) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string MetricName(Field f) {
  const auto& info = Info(f);
  if (!info.dcgm_name.empty()) return std::string(info.dcgm_name);
  return "gpufleet_gpu_" + std::string(info.name);
}

// Each field's metric name, and its __name__ label encoded (wire.h).
struct Names {
  std::array<std::string, kFieldCount> metric, label;
};
const Names& FieldNames() {
  static const Names names = [] {
    Names n;
    for (size_t f = 0; f < kFieldCount; ++f) {
      n.metric[f] = MetricName(static_cast<Field>(f));
      n.label[f] = EncodeLabels({{"__name__", n.metric[f]}});
    }
    return n;
  }();
  return names;
}

}  // namespace

struct GpuState;
struct SeriesState {
  const GpuState* gpu = nullptr;
  Field field = Field::kGpuUtil;
  int64_t last_sent = kNever;  // the newest time a receiver took (this run)
  bool pass = false;           // the receiver's filters let it through
  bool ended = false;          // its staleness marker is sent: the GPU left the fleet
  // Within the read being split (Split's bookkeeping): which read, its newest sample so far,
  // how many samples it has and where they start in its request's samples.
  uint64_t read = 0;
  int64_t newest = kNever;
  uint32_t count = 0, offset = 0;
};
struct GpuState {
  uint64_t generation = 0;  // of the labels `before` and `after` were made from; 0: none yet
  // Its labels, encoded (wire.h): those that sort before __name__ and those after it. A series'
  // labels are these with its field's __name__ between them.
  std::string before, after;
  std::array<SeriesState, kFieldCount> fields;
};

// One request: the series in the order they first appear, each one's samples together and in
// order. Kept between reads so that their buffers are reused.
struct Request {
  std::vector<SeriesState*> states;
  std::vector<WireSample> samples;
};

struct RemoteWriter::Receiver {
  ReceiverConfig config;
  net::TlsContext tls;
  std::string auth;  // the Authorization header's value, or ""
  std::vector<Filter> filters;
  std::string cursor_path;
  Cursor cursor;                                   // guarded by mu
  std::unordered_map<std::string, GpuState> gpus;  // Run's thread only
  // Run's thread and, for their own shard's requests and buffers, the shards' threads.
  std::vector<Request> requests;                            // shard-major: shard × chunks + chunk
  std::vector<std::string> encoded, compressed;             // one each per shard
  std::vector<std::unique_ptr<net::HttpSession>> sessions;  // one per shard: its connection
  QueueRead read;                                           // the last read (its buffers reused)
  std::vector<SeriesState*> sample_series;                  // Split's, per sample of the read
  std::vector<uint32_t> sample_request;
  uint64_t reads = 0;
  std::thread thread;
  mutable std::mutex mu;
  ReceiverStatus status;  // guarded by mu (pending is computed)

  void Split(const QueueRead& read, const GpuLabels* labels, uint64_t generation,
             const std::vector<uint64_t>& done, size_t chunks);
  void Describe(GpuState& gpu, const Labels& gpu_labels, uint64_t generation);
  bool Send(size_t shard, Request& request, const std::function<bool(int64_t)>& wait);

  void SaveCursor() { cursor.Save(cursor_path); }  // caller holds mu
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
      r->auth = "Basic " + Base64Encode(config.basic_user + ":" + config.basic_password);
    }
    for (const auto& m : config.match) r->filters.push_back(CompileFilter(m).value());
    std::string file;
    for (char c : config.name) file += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    r->cursor_path = (fs::path(w->options_.dir) / (file + ".cursor")).string();
    r->cursor.shard_done.assign(static_cast<size_t>(config.shards), 0);
    if (!r->cursor.Load(r->cursor_path))
      r->cursor.pos = w->queue_->End();  // a new receiver starts from now
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
                          const std::vector<uint32_t>& handles,
                          const std::vector<StoredPoint>& points) {
  {
    std::lock_guard lock(seen_mu_);
    for (const auto& p : points) {
      const uint32_t h = handles[p.gpu];
      if (h == UINT32_MAX) continue;  // no handle: the store stored none of its points
      if (h >= seen_.size()) seen_.resize(h + 1);
      Seen& seen = seen_[h];
      if (seen.fields == 0) {
        if (seen.uuid.empty()) seen.uuid = uuids[p.gpu];
        seen.newest = p.t;
      }
      seen.fields |= 1u << static_cast<uint32_t>(p.field);
      seen.newest = std::max(seen.newest, p.t);
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
    if (labels_ && (labels_ == now || *labels_ == *now)) return;
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
    for (Seen& seen : seen_) {
      if (seen.fields == 0 || now->count(seen.uuid)) continue;
      auto gpu = static_cast<uint32_t>(uuids.size());
      uuids.push_back(seen.uuid);
      const int64_t t = std::max(t_now, seen.newest + 1);
      for (size_t f = 0; f < kFieldCount; ++f) {
        if (seen.fields & (1u << f)) points.push_back({gpu, static_cast<Field>(f), t, StaleNaN()});
      }
      seen.fields = 0;
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
    s.pending = end > r->cursor.pos.seq ? end - r->cursor.pos.seq : 0;
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

// A read's samples into requests, each series once with its samples in order: what the
// receiver has not taken yet and its selectors let through. A GPU's series go to shard
// hash % shards and, within it, to request (hash / shards) % chunks: the same read always gives
// the same requests, and a series' samples of one read travel together in one request.
void RemoteWriter::Receiver::Split(const QueueRead& read, const GpuLabels* labels,
                                   uint64_t generation, const std::vector<uint64_t>& done,
                                   size_t chunks) {
  const auto shards = static_cast<size_t>(config.shards);
  requests.resize(shards * chunks);
  for (auto& q : requests) {
    q.states.clear();
    q.samples.clear();
  }
  const uint64_t this_read = ++reads;
  // Per GPU of the read (a frame's GPUs; the same GPU is in many frames): its state, labels and
  // request, or UINT32_MAX when that request was sent before this read was interrupted.
  std::vector<GpuState*> gpu(read.uuids.size());
  std::vector<const Labels*> gpu_labels(read.uuids.size(), nullptr);
  std::vector<uint32_t> gpu_request(read.uuids.size());
  for (size_t i = 0; i < read.uuids.size(); ++i) {
    const uint64_t h = Hash(read.uuids[i]);
    const size_t shard = h % shards, chunk = (h / shards) % chunks;
    gpu_request[i] =
        chunk < done[shard] ? UINT32_MAX : static_cast<uint32_t>(shard * chunks + chunk);
    gpu[i] = &gpus[read.uuids[i]];
    if (labels) {
      if (auto it = labels->find(read.uuids[i]); it != labels->end()) gpu_labels[i] = &it->second;
    }
  }
  sample_series.assign(read.samples.size(), nullptr);
  sample_request.resize(read.samples.size());
  for (size_t i = 0; i < read.samples.size(); ++i) {
    const QueuedSample& s = read.samples[i];
    const uint32_t request = gpu_request[s.uuid];
    if (request == UINT32_MAX) continue;
    GpuState& g = *gpu[s.uuid];
    SeriesState& st = g.fields[static_cast<size_t>(s.field)];
    if (const Labels* l = gpu_labels[s.uuid]) {
      if (g.generation != generation || st.ended) Describe(g, *l, generation);
    } else {
      // A GPU the fleet no longer lists: what it stored before it left goes under the labels
      // it had, up to its staleness marker; after that (a retired node's agent still running),
      // nothing, as labels of its own would start other series.
      if (g.generation == 0 || st.ended) continue;
      if (IsStaleNaN(s.v)) st.ended = true;
    }
    if (!st.pass) continue;
    if (st.read != this_read) {
      st.read = this_read;
      st.newest = st.last_sent;
      st.count = 0;
    }
    if (s.t <= st.newest) continue;  // taken already, or out of order
    st.newest = s.t;
    auto& q = requests[request];
    if (st.count++ == 0) q.states.push_back(&st);
    sample_series[i] = &st;
    sample_request[i] = request;
  }
  // Each series' place in its request, then its samples into it.
  for (auto& q : requests) {
    uint32_t offset = 0;
    for (SeriesState* st : q.states) {
      st->offset = offset;
      offset += st->count;
      st->count = 0;
    }
    q.samples.resize(offset);
  }
  for (size_t i = 0; i < read.samples.size(); ++i) {
    SeriesState* st = sample_series[i];
    if (!st) continue;
    const QueuedSample& s = read.samples[i];
    double v = IsStaleNaN(s.v) ? s.v : s.v * Info(s.field).metrics_scale;
    requests[sample_request[i]].samples[st->offset + st->count++] = {s.t, v};
  }
}

// A GPU's labels, and which of its series the selectors pass, from the fleet's labels of it.
void RemoteWriter::Receiver::Describe(GpuState& g, const Labels& gpu_labels, uint64_t generation) {
  const Names& names = FieldNames();
  Labels before, after;
  for (const auto& [name, value] : gpu_labels) (name < "__name__" ? before : after)[name] = value;
  g.before = EncodeLabels(before);
  g.after = EncodeLabels(after);
  g.generation = generation;
  for (size_t f = 0; f < kFieldCount; ++f) {
    SeriesState& st = g.fields[f];
    st.gpu = &g;
    st.field = static_cast<Field>(f);
    st.ended = false;
    st.pass =
        filters.empty() || std::any_of(filters.begin(), filters.end(), [&](const Filter& filter) {
          return filter.Matches(names.metric[f], gpu_labels);
        });
  }
}

// One request, sent until it is taken or refused; false when the writer stopped while it
// waited to send it again.
bool RemoteWriter::Receiver::Send(size_t shard, Request& q,
                                  const std::function<bool(int64_t)>& wait) {
  const Names& names = FieldNames();
  std::vector<WireSeries> series;
  series.reserve(q.states.size());
  for (const SeriesState* st : q.states) {
    series.push_back(
        {{st->gpu->before, names.label[static_cast<size_t>(st->field)], st->gpu->after},
         q.samples.data() + st->offset,
         st->count});
  }
  EncodeWriteRequest(series, encoded[shard]);
  net::HttpCall call;
  call.method = "POST";
  call.url = config.url;
  Compress(encoded[shard], compressed[shard]);
  call.body = std::move(compressed[shard]);
  call.timeout_ms = config.timeout_ms;
  call.tls = tls;
  call.max_body_bytes = 1 << 20;
  call.headers = {{"Content-Type", "application/x-protobuf"},
                  {"Content-Encoding", "snappy"},
                  {"User-Agent", "gpufleet/" GPUFLEET_VERSION},
                  {"X-Prometheus-Remote-Write-Version", "0.1.0"}};
  if (!auth.empty()) call.headers.emplace_back("Authorization", auth);
  const uint64_t samples = q.samples.size();
  int64_t backoff = kFirstBackoffMs;
  bool stopped = false;
  for (;;) {
    auto res = sessions[shard]->Send(call);
    const int code = res.ok() ? res->status : 0;
    std::unique_lock lock(mu);
    ++status.requests;
    if (code >= 200 && code < 300) {
      status.sent += samples;
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
      status.dropped += samples;
      spdlog::warn("remote write {}: {} samples refused: {}", config.name, samples, why);
      break;
    }
    status.failed += samples;
    ++status.retries;
    status.state = "retrying";
    lock.unlock();
    if (!wait(backoff)) {
      stopped = true;
      break;
    }
    backoff = std::min(backoff * 2, kMaxBackoffMs);
  }
  compressed[shard] = std::move(call.body);  // its buffer, for the next request
  if (stopped) return false;
  int64_t newest = 0;
  for (SeriesState* st : q.states) {
    st->last_sent = q.samples[st->offset + st->count - 1].t;
    newest = std::max(newest, st->last_sent);
  }
  std::lock_guard lock(mu);
  status.newest_sent_sample_ms = std::max(status.newest_sent_sample_ms, newest);
  return true;
}

// The shards of a split read in parallel, each one's requests in turn. Each request taken is
// recorded at once, so that a stop or a crash before the rest are taken does not send it
// again. False when the writer stopped first.
bool RemoteWriter::SendShards(Receiver& r, size_t chunks, const std::vector<uint64_t>& done) {
  auto wait = [this](int64_t ms) { return Wait(ms); };
  std::atomic<bool> interrupted{false};
  auto send = [&](size_t shard) {
    for (size_t c = done[shard]; c < chunks && !interrupted; ++c) {
      Request& q = r.requests[shard * chunks + c];
      if (!q.samples.empty() && !r.Send(shard, q, wait)) {
        interrupted = true;
        return;
      }
      std::lock_guard lock(r.mu);
      r.cursor.shard_done[shard] = c + 1;
      if (!q.samples.empty()) r.SaveCursor();
    }
  };
  std::vector<std::thread> threads;
  for (size_t i = 1; i < done.size(); ++i) threads.emplace_back(send, i);
  send(0);
  for (auto& t : threads) t.join();
  return !interrupted;
}

void RemoteWriter::Run(Receiver& r) {
  const auto shards = static_cast<size_t>(r.config.shards);
  const size_t per_round = shards * r.config.max_samples_per_send;
  r.encoded.resize(shards);
  r.compressed.resize(shards);
  r.sessions.resize(shards);
  for (auto& session : r.sessions) session = std::make_unique<net::HttpSession>();
  for (;;) {
    Position at;
    std::vector<uint64_t> done;
    uint64_t until = 0, chunks_then = 0;
    {
      std::lock_guard lock(r.mu);
      at = r.cursor.pos;
      done = r.cursor.shard_done;
      until = r.cursor.until;
      chunks_then = r.cursor.chunks;
    }
    const auto read_at = std::chrono::steady_clock::now();
    // An interrupted read is read again exactly; a new one takes what there is, up to a cap.
    // Into the same buffers each time: a read is a million samples at most.
    Status got = until ? queue_->Read(at, SIZE_MAX, until, r.read)
                       : queue_->Read(at, options_.max_read, UINT64_MAX, r.read);
    if (!got.ok()) {
      spdlog::error("remote write {}: {}", r.config.name, got.error().message);
      if (!Wait(1'000)) return;
      continue;
    }
    const QueueRead* read = &r.read;
    if (read->lost) {
      std::lock_guard lock(r.mu);
      r.status.dropped += read->lost;
      spdlog::warn("remote write {}: {} samples left the queue's window before they were sent",
                   r.config.name, read->lost);
    }
    const size_t chunks = std::max<size_t>(1, (read->samples.size() + per_round - 1) / per_round);
    // The window took part of an interrupted read, or max_samples_per_send changed since: it
    // splits another way now, and starts again.
    if (until && (read->lost || read->end.seq != until || chunks != chunks_then))
      done.assign(shards, 0);
    {
      std::lock_guard lock(r.mu);
      r.cursor.until = read->end.seq;
      r.cursor.chunks = chunks;
      r.cursor.shard_done = done;
    }
    auto [labels, generation] = LabelsFor(*read, read_at);
    r.Split(*read, labels.get(), generation, done, chunks);
    const bool interrupted = !SendShards(r, chunks, done);
    if (interrupted) return;  // the cursor keeps the requests taken
    {
      std::lock_guard lock(r.mu);
      bool moved = !(r.cursor.pos == read->end) || r.cursor.until != 0;
      r.cursor.pos = read->end;
      r.cursor.until = r.cursor.chunks = 0;
      r.cursor.shard_done.assign(shards, 0);
      if (moved) r.SaveCursor();
      if (r.status.state == "idle" && read->samples.empty()) r.status.state = "sending";
    }
    // A full read goes on at once (catching up); otherwise the next one starts batch_wait_ms
    // after this one did, so that each series has several samples a request.
    int64_t rest = 0;
    if (read->samples.size() < options_.max_read) {
      auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::steady_clock::now() - read_at)
                       .count();
      rest = std::max<int64_t>(0, options_.batch_wait_ms - spent);
    }
    if (!Wait(rest)) return;
  }
}

}  // namespace gpufleet::remote
