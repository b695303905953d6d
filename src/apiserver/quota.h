// ObjectCountQuota: ResourceQuota object counts, enforced on create and reported in the
// quotas' status, as kube-apiserver's quota admission and kube-controller-manager's quota
// controller do.
//
// A quota's spec.hard may limit how many objects of a resource a namespace holds:
// `count/<plural>` (core), `count/<plural>.<group>` (any other group, custom resources too),
// and the legacy core names `configmaps`, `secrets`, `services`, `persistentvolumeclaims`,
// `replicationcontrollers` and `resourcequotas`. A create that would take a namespace past
// one of its quotas is refused with kube-apiserver's 403 (`configmaps "x" is forbidden:
// exceeded quota: q, requested: count/configmaps=1, used: count/configmaps=2, limited:
// count/configmaps=2`); dry runs are checked too. Usage is the number of objects stored in the
// namespace, counted while the namespace's lock is held across the check and the write, so two
// creates racing for the last slot cannot both take it (the server is the only writer of its
// store). status.hard (= spec.hard) and status.used are written through the status subresource
// after every admitted create, every removal of a counted object and every write of a quota's
// spec; resources the server does not serve (pods, cpu, memory, ...) are used 0.
// Not covered: services.loadbalancers and services.nodeports (left out of status.used), quota
// scopes and scope selectors (every quota applies to the whole namespace).
// Thread-safe.
#pragma once

#include <array>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "apiserver/resource.h"
#include "core/status.h"
#include "core/sync.h"

namespace klutch::apiserver {

class RestStorage;

// The value of a resource quantity ("5", "1k", "2Ki", "1e3", "500m"); nullopt when it is none.
std::optional<double> QuantityValue(const Json& quantity);
// A quantity as written; numbers as JSON spells them.
std::string QuantityText(const Json& quantity);

class ObjectCountQuota {
 public:
  explicit ObjectCountQuota(RestStorage& rest);

  // Runs `write` (the create of object `name` of `r` in `ns`, returning its outcome) if one more
  // object of `r` fits every ResourceQuota of `ns`; otherwise kForbidden naming the first quota
  // that would be exceeded, and `write` does not run. Unless `dry_run`, the quotas' status is
  // brought up to date after a write that succeeded.
  core::Status AdmitCreate(const ResourceInfo& r, std::string_view ns, std::string_view name,
                           bool dry_run, const std::function<core::Status()>& write);
  // After an object of `r` left `ns`: status.used of the quotas counting `r` recounted.
  void Removed(const ResourceInfo& r, std::string_view ns);
  // After a quota of `ns` was written: status.hard and status.used of every quota of `ns`.
  void QuotaWritten(std::string_view ns);
  // The quota keys counting objects of `r` (none for cluster-scoped resources).
  static std::vector<std::string> KeysFor(const ResourceInfo& r);

 private:
  struct Quota {
    std::string name;
    Json hard;    // spec.hard
    Json status;  // as stored
  };
  core::Mutex& LockFor(std::string_view ns);
  core::Result<std::vector<Quota>> QuotasIn(std::string_view ns);
  core::Result<int64_t> Count(const ResourceInfo& r, std::string_view ns);
  // Writes status.hard and status.used of the quotas of `ns` (those counting `only`, when
  // given). Caller holds LockFor(ns).
  void RecountLocked(std::string_view ns, const ResourceInfo* only);

  RestStorage& rest_;
  std::array<core::Mutex, 32> locks_;
};

}  // namespace klutch::apiserver
