#include "alerting/notifier.h"

#include <spdlog/spdlog.h>

#include <boost/json.hpp>
#include <set>

#include "alerting/silence.h"
#include "common/crypto.h"
#include "common/json_text.h"
#include "common/strings.h"
#include "model/json.h"
#include "net/http_client.h"

namespace json = boost::json;

namespace gpufleet::alerting {
namespace {

std::string Doc(const Alert& a) {
  return JsonText(json::object{{"fingerprint", a.fingerprint},
                               {"rule", a.rule},
                               {"labels", ToJson(a.labels)},
                               {"annotations", ToJson(a.annotations)},
                               {"value", a.value},
                               {"state", ToString(a.state)},
                               {"active_since_ms", a.active_since_ms},
                               {"fired_ms", a.fired_ms},
                               {"resolved_ms", a.resolved_ms},
                               {"last_true_ms", a.last_true_ms},
                               {"keep_since_ms", a.keep_since_ms}});
}

std::optional<Alert> FromDoc(const std::string& text) {
  boost::system::error_code ec;
  auto v = json::parse(text, ec);
  if (ec || !v.is_object()) return std::nullopt;
  const auto& o = v.as_object();
  auto str = [&](const char* k) {
    auto* x = o.if_contains(k);
    return x && x->is_string() ? std::string(x->as_string()) : std::string();
  };
  auto num = [&](const char* k) {
    auto* x = o.if_contains(k);
    return x && x->is_int64() ? x->as_int64() : int64_t{0};
  };
  Alert a;
  a.fingerprint = str("fingerprint");
  a.rule = str("rule");
  a.labels = LabelsFromJson(o.contains("labels") ? o.at("labels") : json::value());
  a.annotations = LabelsFromJson(o.contains("annotations") ? o.at("annotations") : json::value());
  a.value = str("value");
  std::string state = str("state");
  if (state == "firing") {
    a.state = State::kFiring;
  } else if (state == "resolved") {
    a.state = State::kResolved;
  } else {
    return std::nullopt;
  }
  a.active_since_ms = num("active_since_ms");
  a.fired_ms = num("fired_ms");
  a.resolved_ms = num("resolved_ms");
  a.last_true_ms = num("last_true_ms");
  a.keep_since_ms = num("keep_since_ms");
  if (a.fingerprint.empty()) return std::nullopt;
  return a;
}

// A channel's route; none: every alert goes there. (Matchers are checked when the channel is
// created, so a stored route parses.)
std::optional<MatcherSet> RouteOf(const Channel& c) {
  if (c.matchers.empty()) return std::nullopt;
  auto matchers = ParseMatchers(c.matchers);
  if (!matchers.ok()) return std::nullopt;
  return MatcherSet(std::move(matchers.value()));
}

// Whether an alert goes to a channel: its route matches it, or the alert is about a team
// (its `team` label) that sends its alerts there. A channel without a route gets every alert,
// unless teams name it: then it gets theirs.
bool Routed(const std::optional<MatcherSet>& route, const std::set<std::string>* teams,
            const Labels& labels) {
  if (teams) {
    auto t = labels.find("team");
    if (t != labels.end() && teams->count(t->second)) return true;
  }
  if (route) return route->Matches(labels);
  return teams == nullptr;
}

const std::set<std::string>* TeamsOf(const std::map<std::string, std::set<std::string>>& by,
                                     const std::string& channel) {
  auto it = by.find(channel);
  return it == by.end() ? nullptr : &it->second;
}

json::object AlertJson(const Alert& a, const std::string& url) {
  json::object o{{"labels", ToJson(a.labels)},
                 {"annotations", ToJson(a.annotations)},
                 {"startsAt", FormatTime(a.fired_ms)},
                 {"generatorURL", url + "/api/v1/alerts?fingerprint=" + a.fingerprint}};
  // A firing alert carries no end: Alertmanager keeps it for its resolve_timeout and the
  // minute-by-minute refresh renews it. A resolved one ends when it resolved.
  if (a.state == State::kResolved) o["endsAt"] = FormatTime(a.resolved_ms);
  return o;
}

}  // namespace

std::string Notifier::AlertmanagerBody(const std::vector<Alert>& alerts, const std::string& url) {
  json::array a;
  for (const auto& alert : alerts) a.push_back(AlertJson(alert, url));
  return JsonText(a);
}

// The payload of Alertmanager's own webhook (version 4), so receivers written for it work.
std::string Notifier::WebhookBody(const std::vector<Alert>& alerts, const Labels& group,
                                  bool grouped, const std::string& receiver,
                                  const std::string& url) {
  json::array items;
  std::string status = "resolved";
  // What every alert of the group shares, as Alertmanager's commonLabels/commonAnnotations.
  Labels common_labels = alerts.empty() ? Labels{} : alerts[0].labels;
  Labels common_annotations = alerts.empty() ? Labels{} : alerts[0].annotations;
  auto intersect = [](Labels& common, const Labels& other) {
    std::erase_if(common, [&](const auto& kv) {
      auto it = other.find(kv.first);
      return it == other.end() || it->second != kv.second;
    });
  };
  for (const auto& alert : alerts) {
    json::object a = AlertJson(alert, url);
    std::string s = alert.state == State::kResolved ? "resolved" : "firing";
    if (s == "firing") status = s;
    a["status"] = s;
    a["fingerprint"] = alert.fingerprint;
    if (!a.contains("endsAt")) a["endsAt"] = "0001-01-01T00:00:00Z";
    items.push_back(std::move(a));
    intersect(common_labels, alert.labels);
    intersect(common_annotations, alert.annotations);
  }
  // As Alertmanager's: the receiver and the group's labels; an ungrouped alert is its own group.
  std::string key = receiver + ":{";
  for (const auto& [k, v] : group) key += k + "=\"" + v + "\",";
  key += "}";
  if (!grouped && alerts.size() == 1) key += "/" + alerts[0].fingerprint;
  return JsonText(json::object{{"version", "4"},
                               {"groupKey", key},
                               {"truncatedAlerts", 0},
                               {"status", status},
                               {"receiver", receiver},
                               {"groupLabels", ToJson(group)},
                               {"commonLabels", ToJson(common_labels)},
                               {"commonAnnotations", ToJson(common_annotations)},
                               {"externalURL", url},
                               {"alerts", std::move(items)}});
}

Notifier::Notifier(store::AlertStore& store, std::shared_ptr<Clock> clock, std::string external_url,
                   std::vector<Rule> rules)
    : store_(store),
      clock_(std::move(clock)),
      external_url_(std::move(external_url)),
      engine_(rules),
      base_rules_(std::move(rules)) {}

Notifier::~Notifier() { Stop(); }

void Notifier::set_external_url(std::string url) {
  std::lock_guard lock(mu_);
  external_url_ = std::move(url);
}

void Notifier::set_secret_key(std::string key) {
  std::lock_guard lock(mu_);
  secret_key_ = std::move(key);
}

Status Notifier::Load() {
  GF_TRY(LoadRules());
  auto docs = store_.LoadAlertDocs();
  if (!docs.ok()) return docs.error();
  std::vector<Alert> alerts;
  int64_t now = clock_->NowMs();
  for (const auto& d : docs.value()) {
    auto a = FromDoc(d);
    if (!a) continue;
    if (a->state == State::kResolved && now - a->resolved_ms > 3'600'000) {
      (void)store_.DeleteAlertDoc(a->fingerprint);
      continue;
    }
    alerts.push_back(*a);
  }
  std::lock_guard lock(mu_);
  engine_.Restore(alerts);
  return {};
}

Status Notifier::LoadRules() {
  std::lock_guard changes(rules_mu_);  // every rule change writes under it
  auto records = store_.ListRules();
  if (!records.ok()) return records.error();
  std::vector<Rule> user;
  for (const auto& r : records.value()) {
    auto rule = RuleFromJson(r.doc);
    if (!rule.ok()) {  // e.g. a metric a newer version had: keep the others running
      spdlog::error("alert rule {} is not loaded: {}", r.name, rule.error().message);
      continue;
    }
    user.push_back(std::move(rule.value()));
  }
  {
    std::lock_guard lock(mu_);
    user_rules_ = user;
    engine_.SetRules(MergeRules(base_rules_, user_rules_));
  }
  return {};
}

// Resolved alerts leave the engine an hour after they resolved; their stored states go too.
void Notifier::Prune(int64_t now) {
  std::set<std::string> live;
  {
    std::lock_guard lock(mu_);
    if (now < next_prune_ms_) return;
    next_prune_ms_ = now + 3'600'000;
    for (const auto& a : engine_.Alerts()) live.insert(a.fingerprint);
  }
  auto docs = store_.LoadAlertDocs();
  if (!docs.ok()) return;
  for (const auto& d : docs.value()) {
    auto a = FromDoc(d);
    if (a && !live.count(a->fingerprint)) (void)store_.DeleteAlertDoc(a->fingerprint);
  }
}

namespace {

// The team that owns the pool an alert is about, so that its channels get it.
void LabelTeams(const Snapshot& snapshot, std::vector<Signal>& signals) {
  std::map<std::string_view, std::string_view> teams;
  for (size_t i = 0; i < snapshot.pools.size() && i < snapshot.pool_teams.size(); ++i) {
    if (!snapshot.pool_teams[i].empty()) teams[snapshot.pools[i]] = snapshot.pool_teams[i];
  }
  if (teams.empty()) return;  // no pool has a team: nothing to look up per signal
  for (auto& sig : signals) {
    auto pool = sig.labels.find("pool");
    if (pool == sig.labels.end() || sig.labels.count("team")) continue;
    if (auto t = teams.find(pool->second); t != teams.end()) {
      sig.labels["team"] = std::string(t->second);
    }
  }
}

// The group an alert's notification goes in: itself (Alertmanager, or a webhook that does not
// group), or the values of the channel's group_by labels.
Labels GroupKey(const Channel& c, const std::vector<std::string>& group_by, const Alert& a) {
  if (c.type == "alertmanager" || group_by.empty()) {
    return {{"alertname", a.rule}, {"\x01fingerprint", a.fingerprint}};
  }
  Labels key;
  for (const auto& l : group_by) {
    auto it = a.labels.find(l);
    if (it != a.labels.end()) key[l] = it->second;
  }
  return key;
}

}  // namespace

Status Notifier::Cycle(const std::vector<health::NodeHealth>& nodes,
                       std::shared_ptr<const Snapshot> snapshot, SeriesReader& reader) {
  int64_t now = clock_->NowMs();
  Prune(now);
  std::vector<Alert> changed;
  std::string url;
  {
    std::lock_guard lock(mu_);
    auto signals = Signals(nodes, engine_.rules());
    Evaluator evaluator(*snapshot, reader);
    auto more = ExprSignals(engine_.rules(), evaluator, &runs_);
    signals.insert(signals.end(), std::make_move_iterator(more.begin()),
                   std::make_move_iterator(more.end()));
    LabelTeams(*snapshot, signals);
    changed = engine_.Evaluate(now, signals);
    snapshot_ = std::move(snapshot);
    url = external_url_;
  }
  if (changed.empty()) return {};
  auto channels = store_.ListChannels();
  if (!channels.ok()) return channels.error();
  std::vector<std::pair<std::string, std::string>> docs;
  for (const auto& a : changed) {
    docs.push_back({a.fingerprint, Doc(a)});
    auto summary = a.annotations.find("summary");
    spdlog::warn("alert {} {}: {}", a.rule, ToString(a.state),
                 summary == a.annotations.end() ? "" : summary->second);
  }
  // Silenced alerts keep their state; their notifications are not written.
  std::vector<const Alert*> sendable;
  auto silences = store_.ListSilences();
  std::optional<ActiveSilences> active;
  if (silences.ok()) active.emplace(silences.value(), now);
  for (const auto& a : changed) {
    if (!active || active->Matching(a.labels).empty()) sendable.push_back(&a);
  }
  std::vector<Notification> out;
  const auto team_channels = TeamsByChannel();
  for (const auto& c : channels.value()) {
    std::optional<MatcherSet> route = RouteOf(c);
    const std::set<std::string>* teams = TeamsOf(team_channels, c.name);
    std::vector<std::string> group_by;
    for (auto& l : Split(c.group_by, ',')) {
      if (!l.empty()) group_by.push_back(l);
    }
    // One notification per alert, or per group of a grouping webhook's alerts.
    std::map<Labels, std::vector<Alert>> groups;
    for (const Alert* a : sendable) {
      if (!Routed(route, teams, a->labels)) continue;
      groups[GroupKey(c, group_by, *a)].push_back(*a);
    }
    for (auto& [key, alerts] : groups) {
      Notification n;
      n.channel = c.name;
      n.created_ms = now;
      n.next_ms = now;
      if (c.type == "alertmanager") {
        n.fingerprint = alerts[0].fingerprint;
        n.body = AlertmanagerBody(alerts, url);
      } else {
        Labels group = key;
        group.erase("\x01fingerprint");
        n.fingerprint = alerts.size() == 1 ? alerts[0].fingerprint : Fingerprint(group);
        n.body = WebhookBody(alerts, group, !group_by.empty(), c.name, url);
      }
      out.push_back(std::move(n));
    }
  }
  GF_TRY(store_.RecordAlertChanges(docs, out));
  cv_.notify_all();
  return {};
}

std::vector<Alert> Notifier::Alerts() const {
  std::lock_guard lock(mu_);
  return engine_.Alerts();
}

int Notifier::Deliver() {
  int64_t now = clock_->NowMs();
  auto due = store_.DueNotifications(now, 100);
  if (!due.ok() || due->empty()) return 0;
  auto channels = store_.ListChannels();
  if (!channels.ok()) return 0;
  int acked = 0;
  for (const auto& n : due.value()) {
    const Channel* channel = nullptr;
    for (const auto& c : channels.value()) {
      if (c.name == n.channel) channel = &c;
    }
    if (!channel) {
      (void)store_.AckNotification(n.id);  // the channel was deleted
      continue;
    }
    net::HttpCall call;
    call.method = "POST";
    call.url = channel->type == "alertmanager" ? channel->url + "/api/v2/alerts" : channel->url;
    call.body = n.body;
    call.timeout_ms = 5'000;
    call.headers = {{"Content-Type", "application/json"},
                    {"X-Gpufleet-Notification-Id", std::to_string(n.id)}};
    if (!channel->secret.empty()) {
      std::string key;
      {
        std::lock_guard lock(mu_);
        key = secret_key_;
      }
      auto secret = OpenSecret(key, channel->secret);
      if (!secret.ok()) {  // not sent unsigned: the receiver would refuse it, or worse, not
        spdlog::error("alerting: channel {}: {}", channel->name, secret.error().message);
        continue;
      }
      call.headers.push_back(
          {"X-Gpufleet-Signature", "sha256=" + HmacSha256Hex(secret.value(), n.body)});
    }
    auto reply = net::Send(call);
    if (reply.ok() && reply->status >= 200 && reply->status < 300) {
      (void)store_.AckNotification(n.id);
      ++acked;
      continue;
    }
    std::string error =
        reply.ok() ? "HTTP " + std::to_string(reply->status) + ": " + reply->body.substr(0, 200)
                   : reply.error().message;
    int64_t backoff = std::min<int64_t>(300'000, 1'000LL << std::min(n.attempts, 9));
    (void)store_.DeferNotification(n.id, now + backoff, error);
    if (n.attempts == 0) {
      spdlog::warn("alert delivery to {} failed, will retry: {}", channel->name, error);
    }
  }
  return acked;
}

std::map<std::string, std::set<std::string>> Notifier::TeamsByChannel() const {
  std::map<std::string, std::set<std::string>> out;
  std::function<std::map<std::string, std::vector<std::string>>()> source;
  {
    std::lock_guard lock(mu_);
    source = team_channels_;
  }
  if (!source) return out;
  for (const auto& [team, channels] : source()) {
    for (const auto& c : channels) out[c].insert(team);
  }
  return out;
}

void Notifier::set_team_channels(
    std::function<std::map<std::string, std::vector<std::string>>()> source) {
  std::lock_guard lock(mu_);
  team_channels_ = std::move(source);
}

void Notifier::Refresh() {
  std::vector<Alert> firing;
  std::string url;
  {
    std::lock_guard lock(mu_);
    for (const auto& a : engine_.Alerts()) {
      if (a.state == State::kFiring) firing.push_back(a);
    }
    url = external_url_;
  }
  auto silences = store_.ListSilences();
  if (silences.ok()) {
    ActiveSilences active(silences.value(), clock_->NowMs());
    std::erase_if(firing, [&](const Alert& a) { return !active.Matching(a.labels).empty(); });
  }
  if (firing.empty()) return;
  auto channels = store_.ListChannels();
  if (!channels.ok()) return;
  const auto team_channels = TeamsByChannel();
  for (const auto& c : channels.value()) {
    if (c.type != "alertmanager") continue;
    std::vector<Alert> routed = firing;
    auto route = RouteOf(c);
    const std::set<std::string>* teams = TeamsOf(team_channels, c.name);
    std::erase_if(routed, [&](const Alert& a) { return !Routed(route, teams, a.labels); });
    if (routed.empty()) continue;
    std::string body = AlertmanagerBody(routed, url);
    net::HttpCall call;
    call.method = "POST";
    call.url = c.url + "/api/v2/alerts";
    call.body = body;
    call.timeout_ms = 5'000;
    call.headers = {{"Content-Type", "application/json"}};
    (void)net::Send(call);  // best effort: the outbox carries the state changes
  }
}

void Notifier::set_gate(std::function<bool(const std::function<void()>&)> gate) {
  gate_ = std::move(gate);
}

void Notifier::Start() {
  sender_ = std::thread([this] {
    auto send = [this] {
      Deliver();
      int64_t now = clock_->NowMs();
      if (now >= next_refresh_ms_) {
        next_refresh_ms_ = now + 60'000;
        Refresh();
      }
    };
    std::unique_lock lock(mu_);
    while (!stopping_) {
      lock.unlock();
      if (gate_) {
        gate_(send);
      } else {
        send();
      }
      lock.lock();
      cv_.wait_for(lock, std::chrono::milliseconds(500));
    }
  });
}

void Notifier::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (sender_.joinable()) sender_.join();
}

}  // namespace gpufleet::alerting
