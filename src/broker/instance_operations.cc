// InstanceRegistry's per-instance operation queue and what its operations do: the workers,
// provision / update (with its roll-back) / start / deprovision / backup / restore on the
// engines, backup retention, the quota loop and node outages. Declared in instance_registry.h.
#include <fmt/chrono.h>
#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <system_error>

#include "broker/instance_registry.h"
#include "core/log.h"
#include "engines/crypto.h"

namespace klutch::broker {
namespace {

namespace fs = std::filesystem;
using SteadyClock = std::chrono::steady_clock;

bool IsQueuedOrRunning(const std::string& status) {
  return status == "queued" || status == "running";
}

}  // namespace

const char* InstanceRegistry::OpName(OpKind k) {
  switch (k) {
    case OpKind::kProvision:
      return "provision";
    case OpKind::kUpdate:
      return "update";
    case OpKind::kDeprovision:
      return "deprovision";
    case OpKind::kStart:
      return "start";
    case OpKind::kBackup:
      return "backup";
    case OpKind::kRestore:
      return "restore";
  }
  return "unknown";
}

void InstanceRegistry::Enqueue(const std::shared_ptr<Entry>& entry, Op op) {
  std::string id;
  bool schedule = false;
  {
    core::MutexLock lock(entry->mu);
    entry->pending.push_back(op);
    if (!entry->running) {
      entry->running = true;
      schedule = true;
    }
    id = entry->record.id;
  }
  if (schedule) {
    core::MutexLock lock(mu_);
    ready_.push_back(id);
    cv_.Signal();
  }
}

void InstanceRegistry::Work() {
  while (true) {
    std::shared_ptr<Entry> entry;
    {
      core::MutexLock lock(mu_);
      while (ready_.empty() && !shut_down_) cv_.Wait(mu_);
      if (shut_down_) return;
      std::string id = ready_.front();
      ready_.pop_front();
      auto it = instances_.find(id);
      if (it == instances_.end()) continue;
      entry = it->second;
    }
    Op op;
    {
      core::MutexLock lock(entry->mu);
      if (entry->pending.empty()) {
        entry->running = false;
        continue;
      }
      op = entry->pending.front();
      entry->pending.pop_front();
    }
    auto started = SteadyClock::now();
    core::Status status;
    if (op.kind == OpKind::kBackup || op.kind == OpKind::kRestore) {
      status = Run(*entry, op);  // binds may go on meanwhile
    } else {
      core::MutexLock engine_lock(entry->engine_mu);
      status = Run(*entry, op);
    }
    if (observer_) {
      observer_(OpName(op.kind), status.ok(),
                std::chrono::duration<double>(SteadyClock::now() - started).count());
    }
    if (!status.ok()) {
      KLUTCH_LOG(kError, "broker", "{} failed: {}", OpName(op.kind), status.message());
    }
    bool again = false;
    std::string id;
    {
      core::MutexLock lock(entry->mu);
      id = entry->record.id;
      if (entry->removed) entry->pending.clear();
      again = !entry->pending.empty();
      if (!again) entry->running = false;
    }
    if (again) {
      core::MutexLock lock(mu_);
      ready_.push_back(id);
      cv_.Signal();
    }
  }
}

// Runs one operation; the entry's engine lock is held (except for backups and restores).
core::Status InstanceRegistry::Run(Entry& entry, const Op& op) {
  InstanceRecord rec;
  {
    core::MutexLock lock(entry.mu);
    rec = entry.record;
  }
  const Service* service = FindService(rec.service_id);
  if (service == nullptr) return core::Internal("unknown service " + rec.service_id);
  engines::DataService& engine = EngineFor(*service);
  const Plan* plan = FindPlan(*service, rec.plan_id);
  if (plan == nullptr) return core::Internal("unknown plan " + rec.plan_id);
  switch (op.kind) {
    case OpKind::kProvision: {
      auto status = engine.Provision(rec, plan->limits, supervisor_);
      FinishOperation(entry, status, rec.operation_key);
      return status;
    }
    case OpKind::kUpdate:
      return RunUpdate(entry, engine, *service, *plan, rec);
    case OpKind::kStart: {
      auto status = engine.Start(rec, plan->limits, supervisor_);
      if (!status.ok()) {
        core::MutexLock lock(entry.mu);
        entry.degraded = true;
        entry.degraded_detail =
            "starting the instance after a broker restart failed: " + status.message();
      }
      return status;
    }
    case OpKind::kDeprovision:
      return RunDeprovision(entry, rec);
    case OpKind::kBackup:
      return RunBackup(entry, engine, rec, *plan, op.id);
    case OpKind::kRestore:
      return RunRestore(entry, engine, rec, *plan, op.id);
  }
  return core::Status::Ok();
}

core::Status InstanceRegistry::RunUpdate(Entry& entry, engines::DataService& engine,
                                         const Service& service, const Plan& plan,
                                         InstanceRecord& rec) {
  const Plan* from = FindPlan(service, rec.previous_plan_id);
  if (from == nullptr) from = &plan;
  auto status = engine.Update(rec, from->limits, plan.limits, supervisor_);
  bool rolled_back = false;
  if (!status.ok()) {
    auto back = RollBack(engine, rec, plan, *from);
    rolled_back = back.ok();
    if (!back.ok()) {
      status = core::Status(status.reason(),
                            fmt::format("{}; going back to the previous plan and parameters "
                                        "failed too: {}",
                                        status.message(), back.message()));
    }
  }
  FinishOperation(entry, status, rec.operation_key, rolled_back ? from : nullptr);
  return status;
}

core::Status InstanceRegistry::RunDeprovision(Entry& entry, const InstanceRecord& rec) {
  for (int node = static_cast<int>(rec.ports.size()) - 1; node >= 0; --node) {
    supervisor_.Stop(rec.id, node);
  }
  auto status = state_.Remove(rec.number);
  if (!status.ok()) {
    FinishOperation(entry, status, rec.operation_key);
    return status;
  }
  {
    core::MutexLock lock(entry.mu);
    entry.removed = true;
  }
  {
    core::MutexLock lock(mu_);
    instances_.erase(rec.id);
  }
  ReleasePorts(rec.ports);
  return core::Status::Ok();
}

// A failed update puts back what ran before it: the previous plan's and parameters'
// configuration on the nodes the previous plan has (restarting them with it), and nodes the
// update added are stopped and removed. `rec` is the record as the update saw it.
core::Status InstanceRegistry::RollBack(engines::DataService& engine, const InstanceRecord& rec,
                                        const Plan& tried, const Plan& previous) {
  InstanceRecord old = rec;
  old.plan_id = previous.id;
  old.parameters = rec.previous_parameters;
  size_t keep = std::min(rec.ports.size(), static_cast<size_t>(previous.limits.PortCount()));
  old.ports.resize(keep);
  for (size_t node = rec.ports.size(); node-- > keep;) {
    supervisor_.Stop(rec.id, static_cast<int>(node));
    std::error_code ec;
    fs::remove_all(options_.engine.NodeDir(rec.number, static_cast<int>(node)), ec);
  }
  PlanLimits from = tried.limits;
  // `keep` counts ports; nodes are fewer where a plan needs more ports than nodes.
  from.nodes = std::min(static_cast<int>(keep), tried.limits.nodes);
  return engine.Update(old, from, previous.limits, supervisor_);
}

// Records how an operation ended. `rolled_back_to`: a failed update whose previous plan and
// parameters run again, so that the instance stays provisioned and usable.
void InstanceRegistry::FinishOperation(Entry& entry, const core::Status& status,
                                       const std::string& key, const Plan* rolled_back_to) {
  core::MutexLock lock(entry.mu);
  auto& rec = entry.record;
  if (rec.operation_key != key) return;
  rec.operation_state = status.ok() ? "succeeded" : "failed";
  rec.operation_description =
      status.ok() ? fmt::format("{} succeeded", rec.operation)
      : rolled_back_to != nullptr
          ? fmt::format(
                "{} failed: {}; the instance runs on with its previous plan and "
                "parameters",
                rec.operation, status.message())
          : fmt::format("{} failed: {}", rec.operation, status.message());
  rec.state = status.ok() || rolled_back_to != nullptr ? kStateProvisioned : kStateFailed;
  rec.message = status.ok() ? "" : rec.operation_description;
  if (rolled_back_to != nullptr) {
    entry.degraded = false;
    size_t keep =
        std::min(rec.ports.size(), static_cast<size_t>(rolled_back_to->limits.PortCount()));
    ReleasePorts(
        std::vector<int>(rec.ports.begin() + static_cast<std::ptrdiff_t>(keep), rec.ports.end()));
    rec.ports.resize(keep);
  }
  if (!status.ok() && rec.operation == "update" && !rec.previous_plan_id.empty()) {
    // The instance stays what it was: the platform may retry the update.
    rec.plan_id = rec.previous_plan_id;
    rec.parameters = rec.previous_parameters;
  }
  rec.updated_at = NowTimestamp();
  if (status.ok() && rec.provisioned_at.empty()) rec.provisioned_at = rec.updated_at;
  if (status.ok()) entry.degraded = false;
  if (auto st = state_.Save(rec); !st.ok()) {
    KLUTCH_LOG(kError, "broker", "saving instance {}: {}", rec.id, st.message());
  }
}

template <typename Fn>
void InstanceRegistry::UpdateBackup(Entry& entry, int64_t id, Fn fn) {
  core::MutexLock lock(entry.mu);
  for (auto& b : entry.record.backups) {
    if (b.id == id) fn(b);
  }
  if (auto st = state_.Save(entry.record); !st.ok()) {
    KLUTCH_LOG(kError, "broker", "saving instance {}: {}", entry.record.id, st.message());
  }
}

template <typename Fn>
void InstanceRegistry::UpdateRestore(Entry& entry, int64_t id, Fn fn) {
  core::MutexLock lock(entry.mu);
  for (auto& x : entry.record.restores) {
    if (x.id == id) fn(x);
  }
  if (auto st = state_.Save(entry.record); !st.ok()) {
    KLUTCH_LOG(kError, "broker", "saving instance {}: {}", entry.record.id, st.message());
  }
}

core::Status InstanceRegistry::RunBackup(Entry& entry, engines::DataService& engine,
                                         const InstanceRecord& rec, const Plan& plan, int64_t id) {
  UpdateBackup(entry, id, [](BackupRecord& b) { b.status = "running"; });
  fs::path dir = state_.BackupDir(rec.number);
  std::error_code ec;
  fs::create_directories(dir, ec);
  fs::permissions(dir, fs::perms::owner_all, ec);
  fs::path plain = dir / fmt::format("{}.plain", id);
  std::string file = fmt::format("{}.enc", id);
  core::Status status =
      ec ? core::Internal(fmt::format("create {}: {}", dir.string(), ec.message()))
         : engine.Backup(rec, plan.limits, plain);
  if (status.ok()) status = engines::EncryptFile(plain, dir / file, rec.encryption_key);
  fs::remove(plain, ec);
  uint64_t size = status.ok() ? fs::file_size(dir / file, ec) : 0;
  // The new backup turns done and the retention removes the oldest under one lock: nobody reads
  // one backup more than the retention keeps (a reader between the two steps did, under load).
  core::MutexLock lock(entry.mu);
  for (auto& b : entry.record.backups) {
    if (b.id != id) continue;
    b.status = status.ok() ? "done" : "failed";
    b.finished_at = NowTimestamp();
    b.size = size;
    b.file = status.ok() ? file : "";
    b.key = status.ok() ? rec.encryption_key : "";
    b.message = status.ok() ? "" : status.message();
  }
  if (status.ok()) ApplyRetention(entry);
  if (auto st = state_.Save(entry.record); !st.ok()) {
    KLUTCH_LOG(kError, "broker", "saving instance {}: {}", entry.record.id, st.message());
  }
  return status;
}

void InstanceRegistry::ApplyRetention(Entry& entry) {
  auto& rec = entry.record;
  std::vector<BackupRecord*> done;
  for (auto& b : rec.backups) {
    if (b.status == "done") done.push_back(&b);
  }
  std::sort(done.begin(), done.end(), [](auto* a, auto* b) { return a->id > b->id; });
  auto cutoff = std::chrono::system_clock::now() - options_.retention;
  std::string cutoff_text = fmt::format("{:%Y-%m-%dT%H:%M:%S}",
                                        fmt::gmtime(std::chrono::system_clock::to_time_t(cutoff)));
  std::set<int64_t> restoring;
  for (const auto& x : rec.restores) {
    if (IsQueuedOrRunning(x.status)) restoring.insert(x.backup_id);
  }
  for (size_t i = 0; i < done.size(); ++i) {
    BackupRecord& b = *done[i];
    if (static_cast<int>(i) < options_.min_backups || restoring.contains(b.id)) continue;
    bool too_many = static_cast<int>(i) >= options_.max_backups;
    bool too_old = b.finished_at < cutoff_text;
    if (!too_many && !too_old) continue;
    std::error_code ec;
    fs::remove(state_.BackupDir(rec.number) / b.file, ec);
    b.status = "deleted";
    b.file.clear();
    b.key.clear();
    b.message = too_many ? "removed by retention (backup count)" : "removed by retention (age)";
  }
}

core::Status InstanceRegistry::RunRestore(Entry& entry, engines::DataService& engine,
                                          const InstanceRecord& rec, const Plan& plan, int64_t id) {
  UpdateRestore(entry, id, [](RestoreRecord& x) { x.status = "running"; });
  const RestoreRecord* restore = nullptr;
  for (const auto& x : rec.restores) {
    if (x.id == id) restore = &x;
  }
  const BackupRecord* backup = nullptr;
  for (const auto& b : rec.backups) {
    if (restore != nullptr && b.id == restore->backup_id) backup = &b;
  }
  core::Status status;
  fs::path plain = state_.BackupDir(rec.number) / fmt::format("restore-{}.plain", id);
  if (backup == nullptr || backup->status != "done" || backup->file.empty()) {
    status = core::Invalid("the backup to restore is gone");
  } else {
    status = engines::DecryptFile(state_.BackupDir(rec.number) / backup->file, plain, backup->key);
    if (status.ok()) status = engine.Restore(rec, plan.limits, plain, supervisor_);
  }
  std::error_code ec;
  fs::remove(plain, ec);
  UpdateRestore(entry, id, [&](RestoreRecord& x) {
    x.status = status.ok() ? "done" : "failed";
    x.finished_at = NowTimestamp();
    x.message = status.ok() ? "" : status.message();
  });
  return status;
}

void InstanceRegistry::OnNodeChange(const std::string& id, bool up, const std::string& detail) {
  std::shared_ptr<Entry> entry;
  {
    core::MutexLock lock(mu_);
    auto it = instances_.find(id);
    if (it == instances_.end()) return;
    entry = it->second;
  }
  bool all_up = up && supervisor_.InstanceUp(id);
  core::MutexLock lock(entry->mu);
  if (!up) {
    entry->degraded = true;
    entry->degraded_detail = fmt::format("{}; the broker is restarting it", detail);
  } else if (all_up && entry->degraded) {
    entry->degraded = false;
    entry->degraded_detail = "recovered from a crash of one of its servers; watching it";
    entry->recovered_at = SteadyClock::now();
  }
}

void InstanceRegistry::QuotaLoop() {
  while (true) {
    {
      core::MutexLock lock(mu_);
      auto deadline = core::CondVar::DeadlineAfter(options_.quota_interval);
      while (!shut_down_ && SteadyClock::now() < deadline) quota_cv_.WaitUntil(mu_, deadline);
      if (shut_down_) return;
    }
    for (auto& entry : Entries()) CheckQuota(*entry);
  }
}

// Marks a provisioned instance read-only above its plan's disk quota (capped by
// max_disk_per_instance) and keeps the engine's message in its record.
void InstanceRegistry::CheckQuota(Entry& entry) {
  InstanceRecord rec;
  {
    core::MutexLock lock(entry.mu);
    if (entry.running || entry.record.state != kStateProvisioned) return;
    rec = entry.record;
  }
  const Service* s = FindService(rec.service_id);
  const Plan* plan = s != nullptr ? FindPlan(*s, rec.plan_id) : nullptr;
  if (plan == nullptr) return;
  Plan limited = *plan;
  if (options_.max_disk_per_instance > 0) {
    limited.limits.disk_quota_bytes =
        std::min(limited.limits.disk_quota_bytes, options_.max_disk_per_instance);
  }
  std::string message;
  {
    core::MutexLock engine_lock(entry.engine_mu);
    message = EngineFor(*s).EnforceQuota(rec, limited.limits);
  }
  core::MutexLock lock(entry.mu);
  if (entry.record.message != message && entry.record.state == kStateProvisioned) {
    entry.record.message = message;
    (void)state_.Save(entry.record);
  }
}

}  // namespace klutch::broker
