#include "controllers/crd_reconciler.h"

#include "core/clock.h"
#include "machinery/object.h"
#include "reconcile/committer.h"

namespace klutch::controllers {

using client::Json;
using machinery::Find;
using machinery::GetString;

namespace {

constexpr const char* kManager = "klutch-apiserver-crd";
constexpr const char* kCleanupFinalizer = "customresourcecleanup.apiextensions.k8s.io";

// A JSON true (nullptr, other types and false are not).
bool IsTrue(const Json* value) {
  const bool* b = value ? value->get_ptr<const bool*>() : nullptr;
  return b != nullptr && *b;
}

void SetCondition(Json& status, const std::string& type, const std::string& value,
                  const std::string& reason, const std::string& message, const std::string& now) {
  Json& conds = status["conditions"];
  if (!conds.is_array()) conds = Json::array();
  // Whatever else a client wrote there, keep only well-formed conditions.
  Json kept = Json::array();
  for (auto& c : conds) {
    if (c.is_object() && !GetString(c, {"type"}).empty()) kept.push_back(std::move(c));
  }
  conds = std::move(kept);
  for (auto& c : conds) {
    if (GetString(c, {"type"}) != type) continue;
    if (GetString(c, {"status"}) != value) c["lastTransitionTime"] = now;
    c["status"] = value;
    c["reason"] = reason;
    c["message"] = message;
    return;
  }
  conds.push_back({{"type", type},
                   {"status", value},
                   {"lastTransitionTime", now},
                   {"reason", reason},
                   {"message", message}});
}

// The status the CRD should have, given whether its names were accepted.
Json DesiredStatus(const Json& crd, const core::Status& served) {
  const bool accepted = served.ok();
  const std::string now = core::FormatTime(core::RealClock::Get().Now());
  const Json* current = Find(crd, {"status"});
  Json status = current && current->is_object() ? *current : Json::object();
  const Json* spec_names = Find(crd, {"spec", "names"});
  Json names = spec_names && spec_names->is_object() ? *spec_names : Json::object();
  const std::string kind = GetString(names, {"kind"});
  if (GetString(names, {"singular"}).empty() && !kind.empty()) {
    std::string lower = kind;
    for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    names["singular"] = lower;
  }
  if (GetString(names, {"listKind"}).empty() && !kind.empty()) names["listKind"] = kind + "List";
  if (accepted) status["acceptedNames"] = names;
  Json stored = Json::array();
  if (const Json* sv = Find(status, {"storedVersions"}); sv && sv->is_array()) {
    for (const auto& v : *sv) {
      if (v.is_string()) stored.push_back(v);
    }
  }
  if (const Json* versions = Find(crd, {"spec", "versions"}); versions && versions->is_array()) {
    for (const auto& v : *versions) {
      const Json* storage = Find(v, {"storage"});
      if (!IsTrue(storage)) continue;
      std::string vn = GetString(v, {"name"});
      bool have = false;
      for (const auto& s : stored) have = have || s == vn;
      if (!have) stored.push_back(vn);
    }
  }
  status["storedVersions"] = stored;
  SetCondition(status, "NamesAccepted", accepted ? "True" : "False",
               accepted ? "NoConflicts" : "InvalidNames",
               accepted ? "no conflicts found" : served.message(), now);
  SetCondition(status, "Established", accepted ? "True" : "False",
               accepted ? "InitialNamesAccepted" : "NotAccepted",
               accepted ? "the initial names have been accepted" : "not all names are accepted",
               now);
  return status;
}

std::string StorageVersion(const Json& crd) {
  const Json* versions = Find(crd, {"spec", "versions"});
  if (!versions || !versions->is_array()) return "";
  for (const auto& v : *versions) {
    const Json* storage = Find(v, {"storage"});
    if (IsTrue(storage)) return GetString(v, {"name"});
  }
  return "";
}

}  // namespace

core::Result<reconcile::Result> CrdReconciler::Reconcile(const reconcile::Request& request) {
  client::ObjectPtr crd = crds_.Get(request.name);
  if (!crd) {
    serving_.StopServing(request.name);
    return reconcile::Result::Done();
  }
  if (machinery::IsBeingDeleted(*crd)) return Cleanup(*crd);
  // Serve first, then report Established: clients waiting for the condition can use the
  // resources at once.
  core::Status served = serving_.Serve(*crd);
  Json modified = *crd;
  modified["status"] = DesiredStatus(*crd, served);
  client::ResourceClient crds(rest_, client::resources::kCustomResourceDefinitions);
  auto res = reconcile::Committer(crds, kManager).CommitStatus(*crd, modified);
  if (!res.ok() && !core::IsNotFound(res.status())) return res.status();
  return reconcile::Result::Done();
}

core::Result<reconcile::Result> CrdReconciler::Cleanup(const Json& crd) {
  const std::string name = machinery::Name(crd);
  const std::string group = GetString(crd, {"spec", "group"});
  const std::string plural = GetString(crd, {"spec", "names", "plural"});
  const std::string version = StorageVersion(crd);
  bool remaining = false;
  // Only instances this CRD serves: never a built-in kind or another CRD's objects.
  if (!version.empty() && serving_.Serves(name, group, plural)) {
    client::ResourceClient instances(rest_, {group, version, plural});
    KLUTCH_ASSIGN_OR_RETURN(Json list, instances.ListAll());
    for (const auto& item : list["items"]) {
      remaining = true;
      if (machinery::IsBeingDeleted(item)) continue;
      auto del = instances.Namespace(machinery::Namespace(item)).Delete(machinery::Name(item));
      if (!del.ok() && !core::IsNotFound(del.status())) return del.status();
    }
  }
  if (remaining) return reconcile::Result::RequeueAfter(std::chrono::milliseconds(500));
  if (!machinery::HasFinalizer(crd, kCleanupFinalizer)) return reconcile::Result::Done();
  Json modified = crd;
  Json kept = Json::array();
  for (const auto& f : modified["metadata"]["finalizers"]) {
    if (f != kCleanupFinalizer) kept.push_back(f);
  }
  modified["metadata"]["finalizers"] = std::move(kept);
  client::ResourceClient crds(rest_, client::resources::kCustomResourceDefinitions);
  auto res = reconcile::Committer(crds, kManager).Commit(crd, modified);
  if (!res.ok() && !core::IsNotFound(res.status())) return res.status();
  return reconcile::Result::Done();
}

}  // namespace klutch::controllers
