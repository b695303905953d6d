#include "a8s/backup_reconciler.h"

#include <fmt/format.h>

#include <system_error>

#include "a8s/a8s_names.h"
#include "core/log.h"
#include "core/strings.h"
#include "engines/crypto.h"
#include "machinery/json_numbers.h"
#include "machinery/object.h"
#include "reconcile/conditions.h"

namespace klutch::a8s {

namespace fs = std::filesystem;
using reconcile::Result;
using reconcile::Step;

struct BackupReconciler::Pass {
  Json object;
  Json modified;
  ResolvedInstance instance;
  std::string key() const { return machinery::Namespace(object) + "/" + machinery::Name(object); }
};

fs::path BackupReconciler::File(const OperatorContext& ctx, int64_t number,
                                const std::string& backup_uid) {
  return ctx.store.dir().BackupDir(number) / (backup_uid + ".enc");
}

namespace {

// spec.maxRetries: a count, or Infinite (the default).
std::optional<int64_t> MaxRetries(const Json& object) {
  std::string text = machinery::GetString(object, {"spec", "maxRetries"});
  if (text.empty() || text == "Infinite") return std::nullopt;
  return core::ParseInt64(text);
}

}  // namespace

core::Result<Result> BackupReconciler::Reconcile(const reconcile::Request& request) {
  auto cached = ctx_.backups.indexer().Get(request.Key());
  if (cached == nullptr) return Result::Done();
  Pass p{.object = *cached, .modified = *cached};
  if (machinery::IsBeingDeleted(p.object)) return Delete(p);
  // Taken once: a finished backup is never taken again.
  if (!machinery::GetString(p.object, {"status", "backupID"}).empty()) return Result::Done();
  KLUTCH_RUN_STEP(EnsureFinalizer(p));
  KLUTCH_RUN_STEP(WaitAfterFailure(p));
  KLUTCH_RUN_STEP(ResolveInstance(p));
  KLUTCH_RUN_STEP(MarkInProgress(p));
  return TakeBackup(p);
}

core::Result<Result> BackupReconciler::Delete(Pass& p) {
  if (!machinery::HasFinalizer(p.object, kFinalizer)) return Result::Done();
  const std::string id = machinery::GetString(p.object, {"status", "backupID"});
  const std::string uid = machinery::Uid(p.object);
  for (const InstanceRecord& record : ctx_.store.All()) {
    std::error_code ec;
    const fs::path file = File(ctx_, record.number, uid);
    fs::remove(file, ec);
    fs::remove(file.parent_path() / (uid + ".plain"), ec);  // of an attempt that crashed
  }
  KLUTCH_LOG(kInfo, "operator", "Backup {} ({}) deleted", p.key(), id);
  KLUTCH_RETURN_IF_ERROR(SetFinalizer(ctx_, kBackups, p.object, false).status());
  return Result::Done();
}

Step BackupReconciler::EnsureFinalizer(Pass& p) {
  KLUTCH_ASSIGN_OR_RETURN(bool wrote, SetFinalizer(ctx_, kBackups, p.object, true));
  if (wrote) return Result::Done();
  return reconcile::Continue();
}

// After a failed attempt: done for good once spec.maxRetries attempts failed, else the next
// one waits its turn (a status write would otherwise bring it back at once).
Step BackupReconciler::WaitAfterFailure(Pass& p) {
  const Json* r = machinery::Find(p.object, {"status", "retries"});
  const int64_t retries = r != nullptr ? machinery::AsInt64(*r).value_or(0) : 0;
  auto ready = reconcile::FindCondition(p.object, "Ready");
  if (!ready || ready->status != "False" || ready->reason != "BackupFailed") {
    return reconcile::Continue();
  }
  if (auto max = MaxRetries(p.object); max && retries > *max) return Result::Done();
  if (auto wait = RetryBackoff(ctx_, p.object, "BackupFailed", retries); wait.count() > 0) {
    return Result::RequeueAfter(wait);
  }
  return reconcile::Continue();
}

Step BackupReconciler::ResolveInstance(Pass& p) {
  auto instance = ResolveServiceInstance(ctx_, p.object);
  if (!instance.ok()) {
    const bool wait = !core::IsInvalid(instance.status());
    return Failed(ctx_, kBackups, p.object, p.modified,
                  wait ? "InstanceNotReady" : "UnsupportedInstance",
                  fmt::format("Backup {}: {}", p.key(), instance.status().message()),
                  wait ? std::chrono::seconds(5) : std::chrono::milliseconds(0));
  }
  p.instance = std::move(*instance);
  return reconcile::Continue();
}

// Says the backup runs before it does: a dump of a big database takes a while.
Step BackupReconciler::MarkInProgress(Pass& p) {
  if (reconcile::IsConditionTrue(p.object, "InProgress")) return reconcile::Continue();
  SetProgress(ctx_, p.modified, Generation(p.object), true, "False", "BackupInProgress",
              fmt::format("dumping Postgresql {}/{}", machinery::Namespace(p.instance.object),
                          machinery::Name(p.instance.object)));
  const Json* retries = machinery::Find(p.object, {"status", "retries"});
  p.modified["status"]["retries"] = retries ? machinery::AsInt64(*retries).value_or(0) : 0;
  KLUTCH_RETURN_IF_ERROR(WriteStatus(ctx_, kBackups, p.object, p.modified));
  return Result::Done();  // the status write brings the object back
}

core::Result<Result> BackupReconciler::TakeBackup(Pass& p) {
  const InstanceRecord& record = p.instance.record;
  const std::string uid = machinery::Uid(p.object);
  const fs::path file = File(ctx_, record.number, uid);
  const fs::path plain = file.parent_path() / (uid + ".plain");
  std::error_code ec;
  fs::create_directories(file.parent_path(), ec);
  fs::permissions(file.parent_path(), fs::perms::owner_all, ec);
  core::Status status;
  {
    auto lock = ctx_.store.LockFor(record.id);
    core::MutexLock hold(*lock);
    fs::remove(plain, ec);  // what a crashed attempt left
    status = ctx_.engine.Backup(record, AppliedLimits(record), plain);
    if (status.ok()) status = engines::EncryptFile(plain, file, record.encryption_key);
    fs::remove(plain, ec);
  }
  const int64_t generation = Generation(p.object);
  const std::string pod = fmt::format("{}/{}-0", machinery::Namespace(p.instance.object),
                                      machinery::Name(p.instance.object));
  p.modified["status"]["podUsedNamespacedName"] = pod;
  p.modified["status"]["podUsedUID"] = record.id;
  if (!status.ok()) {
    const int64_t retries = machinery::AsInt64(p.modified["status"]["retries"]).value_or(0) + 1;
    p.modified["status"]["retries"] = retries;
    const auto max = MaxRetries(p.object);
    const bool again = !max || retries <= *max;
    const std::string message =
        fmt::format("Backup {}: dumping Postgresql {} failed: {}{}", p.key(), pod, status.message(),
                    again ? "; trying again" : "; spec.maxRetries reached");
    SetProgress(ctx_, p.modified, generation, false, "False", "BackupFailed", message);
    ctx_.events.Event(p.object, reconcile::kEventTypeWarning, "BackupFailed", message);
    KLUTCH_RETURN_IF_ERROR(WriteStatus(ctx_, kBackups, p.object, p.modified));
    if (again)
      return Result::RequeueAfter(std::chrono::seconds(std::min<int64_t>(60, 5 * retries)));
    return Result::Done();
  }
  const uint64_t size = fs::file_size(file, ec);
  p.modified["status"]["backupID"] = uid;
  SetProgress(ctx_, p.modified, generation, false, "True", "Complete",
              fmt::format("{} bytes, encrypted", size));
  ctx_.events.Event(p.object, reconcile::kEventTypeNormal, "Complete",
                    fmt::format("backup of Postgresql {} taken ({} bytes, encrypted)", pod, size));
  KLUTCH_RETURN_IF_ERROR(WriteStatus(ctx_, kBackups, p.object, p.modified));
  return Result::Done();
}

}  // namespace klutch::a8s
