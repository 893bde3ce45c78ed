// The audit log's hash chain: each record's hash covers its fields and the hash before it, so
// that an edited, deleted or inserted record breaks the chain where it was changed; pruning
// leaves a signed anchor for the chain to start from.

#include "common/crypto.h"
#include "store/store.h"

namespace gpufleet::store {
namespace {

// A netstring: the length, a colon, the bytes, a comma.
void Field(std::string& out, std::string_view value) {
  out += std::to_string(value.size());
  out += ':';
  out += value;
  out += ',';
}

}  // namespace

std::string AuditHash(const AuditRecord& r, const std::string& prev_hash) {
  std::string canonical = "gpufleet-audit-v1,";
  Field(canonical, std::to_string(r.time_ms));
  Field(canonical, r.actor);
  Field(canonical, r.action);
  Field(canonical, r.target);
  Field(canonical, std::to_string(r.status));
  Field(canonical, r.result);
  Field(canonical, r.before);
  Field(canonical, r.after);
  Field(canonical, prev_hash);
  return Sha256Hex(canonical);
}

std::string AuditAnchorSignature(const AuditAnchor& a, const std::string& key) {
  std::string canonical = "gpufleet-audit-anchor-v1,";
  Field(canonical, std::to_string(a.last_id));
  Field(canonical, a.last_hash);
  Field(canonical, std::to_string(a.pruned));
  Field(canonical, std::to_string(a.time_ms));
  return HmacSha256Hex(key, canonical);
}

Result<AuditVerification> VerifyAudit(AuditLog& log, const std::string& key) {
  AuditVerification v;
  auto bad = [&v](int64_t id, std::string problem) {
    v.ok = false;
    v.first_bad_id = id;
    v.problem = std::move(problem);
    return v;
  };
  std::string prev;
  AuditFilter page;
  page.ascending = true;
  page.limit = 1000;
  auto anchor = log.FindAuditAnchor();
  bool anchored = anchor.ok();
  if (anchored) {
    v.anchor_id = anchor->last_id;
    if (key.empty() || !ConstantTimeEqual(AuditAnchorSignature(*anchor, key), anchor->signature)) {
      return bad(anchor->last_id,
                 "the anchor left by pruning (at record " + std::to_string(anchor->last_id) +
                     ") does not verify: it was edited, or secret.key is not the one that "
                     "signed it");
    }
    prev = anchor->last_hash;
    page.after_id = anchor->last_id;
  } else if (anchor.error().code != ErrorCode::kNotFound) {
    return anchor.error();
  }
  bool chained = false;
  int64_t last_id = page.after_id;
  for (;;) {
    auto records = log.QueryAudit(page);
    if (!records.ok()) return records.error();
    for (const auto& r : records.value()) {
      if (r.hash.empty()) {
        if (!chained && prev.empty()) {  // written before the chain existed
          ++v.unchained;
          last_id = r.id;
          continue;
        }
        return bad(r.id, "record " + std::to_string(r.id) +
                             " has no hash: it was written around the chain, or its hash removed");
      }
      if (r.prev_hash != prev) {
        return bad(r.id, "record " + std::to_string(r.id) + " does not follow " +
                             (last_id > 0 ? "record " + std::to_string(last_id)
                                          : std::string("the start of the log")) +
                             ": a record between them was deleted or inserted");
      }
      if (AuditHash(r, r.prev_hash) != r.hash) {
        return bad(r.id, "record " + std::to_string(r.id) +
                             " was edited: its hash does not match its contents");
      }
      chained = true;
      prev = r.hash;
      last_id = r.id;
      ++v.verified;
    }
    if (records->size() < static_cast<size_t>(page.limit)) break;
    page.after_id = records->back().id;
  }
  return v;
}

}  // namespace gpufleet::store
