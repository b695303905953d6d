#include "reconcile/leader_election.h"

#include <unistd.h>

#include "core/log.h"
#include "core/random.h"

namespace klutch::reconcile {

using client::Json;

namespace {
std::string DefaultIdentity() {
  char host[256] = {0};
  if (::gethostname(host, sizeof(host) - 1) != 0) host[0] = 0;
  return std::string(host[0] ? host : "klutch") + "_" + core::RandomSuffix(8);
}

// The fields that say who holds the lease; a change in them restarts the expiry clock.
int64_t IntField(const Json& lease, const char* key, int64_t fallback) {
  const Json* v = machinery::Find(lease, {"spec", key});
  return v && v->is_number_integer() ? v->get<int64_t>() : fallback;
}

std::string Record(const Json& lease) {
  Json r = {{"holder", machinery::GetString(lease, {"spec", "holderIdentity"})},
            {"renew", machinery::GetString(lease, {"spec", "renewTime"})},
            {"transitions", IntField(lease, "leaseTransitions", 0)}};
  return r.dump();
}

// The elector's own client: one attempt per request, bounded in time, so a renewal can never
// outlast the renew deadline in retries (client-go bounds each attempt the same way).
std::unique_ptr<client::RestClient> LeaseClient(client::RestClient& rest,
                                                const LeaderElectionOptions& o) {
  client::RestConfig config = rest.config();
  config.timeout =
      std::min(config.timeout, std::max(o.retry_period, std::chrono::milliseconds(500)));
  config.timeout = std::min<std::chrono::milliseconds>(config.timeout, o.renew_deadline);
  config.qps = 0;
  auto c = client::RestClient::New(config, {.max_retries = 0, .transport = rest.transport()});
  return c.ok() ? std::move(*c) : nullptr;
}
}  // namespace

LeaderElector::LeaderElector(client::RestClient& rest, LeaderElectionOptions options,
                             const core::Clock& clock)
    : lease_client_(LeaseClient(rest, options)),
      leases_(lease_client_ ? *lease_client_ : rest, client::resources::kLeases,
              options.lease_namespace),
      options_(std::move(options)),
      clock_(clock) {
  if (options_.identity.empty()) options_.identity = DefaultIdentity();
}

LeaderElector::~LeaderElector() { Stop(); }

void LeaderElector::Start() {
  core::MutexLock lock(mu_);
  if (thread_.joinable() || stopping_) return;
  thread_ = std::thread([this] { Run(); });
}

void LeaderElector::Stop() {
  std::thread thread;
  {
    core::MutexLock lock(mu_);
    if (stopping_) return;
    stopping_ = true;
    thread = std::move(thread_);
  }
  cv_.SignalAll();
  if (thread.joinable()) thread.join();
}

bool LeaderElector::IsLeader() const {
  core::MutexLock lock(mu_);
  return leading_;
}

bool LeaderElector::Wait(std::chrono::milliseconds d) {
  core::MutexLock lock(mu_);
  const core::MonoTime deadline = clock_.After(d);
  while (!stopping_ && clock_.MonotonicNow() < deadline) clock_.WaitUntil(cv_, mu_, deadline);
  return !stopping_;
}

bool LeaderElector::TryAcquireOrRenew() {
  const std::string now = core::FormatMicroTime(clock_.Now());
  const int duration_s = static_cast<int>(std::max<int64_t>(
      1, std::chrono::duration_cast<std::chrono::seconds>(options_.lease_duration).count()));
  auto current = leases_.Get(options_.lease_name);
  if (!current.ok()) {
    if (!core::IsNotFound(current.status())) return false;
    Json lease = {
        {"apiVersion", "coordination.k8s.io/v1"},
        {"kind", "Lease"},
        {"metadata", {{"name", options_.lease_name}, {"namespace", options_.lease_namespace}}},
        {"spec",
         {{"holderIdentity", options_.identity},
          {"leaseDurationSeconds", duration_s},
          {"acquireTime", now},
          {"renewTime", now},
          {"leaseTransitions", 0}}}};
    auto created = leases_.Create(lease);
    if (!created.ok()) return false;
    observed_record_ = Record(*created);
    observed_at_ = clock_.MonotonicNow();
    observed_rv_ = machinery::ResourceVersion(*created);
    return true;
  }
  Json lease = std::move(*current);
  std::string record = Record(lease);
  if (record != observed_record_) {
    observed_record_ = record;
    observed_at_ = clock_.MonotonicNow();
  }
  std::string holder = machinery::GetString(lease, {"spec", "holderIdentity"});
  int64_t held_for_s = IntField(lease, "leaseDurationSeconds", duration_s);
  bool ours = holder == options_.identity;
  bool expired = clock_.MonotonicNow() >= observed_at_ + std::chrono::seconds(held_for_s);
  if (!holder.empty() && !ours && !expired) {
    taken_by_other_ = true;
    return false;
  }

  int64_t transitions = IntField(lease, "leaseTransitions", 0);
  Json& s = lease["spec"];
  if (!s.is_object()) s = Json::object();
  if (!ours) {
    s["acquireTime"] = now;
    s["leaseTransitions"] = holder.empty() && transitions == 0 ? 0 : transitions + 1;
  }
  s["holderIdentity"] = options_.identity;
  s["leaseDurationSeconds"] = duration_s;
  s["renewTime"] = now;
  // PUT with the resourceVersion we read: a concurrent candidate's write makes this fail.
  auto updated = leases_.Update(lease);
  if (!updated.ok()) return false;
  if (!ours && options_.on_new_leader) options_.on_new_leader(options_.identity);
  observed_record_ = Record(*updated);
  observed_at_ = clock_.MonotonicNow();
  observed_rv_ = machinery::ResourceVersion(*updated);
  return true;
}

void LeaderElector::Release() {
  auto current = leases_.Get(options_.lease_name);
  if (!current.ok()) return;
  Json lease = std::move(*current);
  if (machinery::GetString(lease, {"spec", "holderIdentity"}) != options_.identity) return;
  lease["spec"]["holderIdentity"] = "";
  lease["spec"]["leaseDurationSeconds"] = 1;
  auto r = leases_.Update(lease);
  if (!r.ok()) {
    KLUTCH_LOG(kWarn, "leader-election", "releasing lease {}/{}: {}", options_.lease_namespace,
               options_.lease_name, r.status().ToString());
  }
}

void LeaderElector::Run() {
  // Campaign until we lead.
  while (true) {
    if (TryAcquireOrRenew()) break;
    if (!Wait(options_.retry_period)) return;
  }
  {
    core::MutexLock lock(mu_);
    leading_ = true;
  }
  KLUTCH_LOG(kInfo, "leader-election", "{} acquired lease {}/{}", options_.identity,
             options_.lease_namespace, options_.lease_name);
  if (options_.on_started_leading) options_.on_started_leading();
  // Renew; give up when renewals keep failing past the deadline.
  auto last_renew = clock_.MonotonicNow();
  bool lost = false;
  while (Wait(options_.retry_period)) {
    taken_by_other_ = false;
    if (TryAcquireOrRenew()) {
      last_renew = clock_.MonotonicNow();
    } else if (taken_by_other_ || clock_.MonotonicNow() - last_renew >= options_.renew_deadline) {
      // Another replica holds it now, or we could not renew in time: stop acting at once.
      lost = true;
      break;
    }
  }
  if (!lost) Release();
  {
    core::MutexLock lock(mu_);
    leading_ = false;
  }
  KLUTCH_LOG(kInfo, "leader-election", "{} {} lease {}/{}", options_.identity,
             lost ? "lost" : "released", options_.lease_namespace, options_.lease_name);
  if (options_.on_stopped_leading) options_.on_stopped_leading();
}

}  // namespace klutch::reconcile
