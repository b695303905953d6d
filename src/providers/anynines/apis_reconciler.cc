#include "providers/anynines/apis_reconciler.h"

#include <array>
#include <string>
#include <string_view>
#include <utility>

#include "core/log.h"
#include "machinery/object.h"
#include "reconcile/conditions.h"

namespace klutch::providers::anynines {

using reconcile::Result;

namespace {

constexpr std::array<std::string_view, 6> kRequiredCrds = {
    "serviceinstances.dataservices.anynines.com", "servicebindings.dataservices.anynines.com",
    "backups.dataservices.anynines.com",          "restores.dataservices.anynines.com",
    "providerconfigs.dataservices.anynines.com",  "providerconfigusages.dataservices.anynines.com"};

}  // namespace

core::Result<Result> ApisReconciler::Reconcile(const reconcile::Request&) {
  const bool ready = AllEstablished();
  std::unique_ptr<Runtime> old;
  {
    core::MutexLock lock(mu_);
    if (stopped_) return Result::Done();
    if (ready == (runtime_ != nullptr)) return Result::Done();
    if (!ready) old.swap(runtime_);
  }
  if (old) {
    KLUTCH_LOG(kInfo, "provider-anynines", "a dataservices.anynines.com CRD went away: stopping");
    old->Stop();
    return Result::Done();
  }
  return StartRuntime();
}

bool ApisReconciler::AllEstablished() const {
  bool ready = true;
  for (std::string_view name : kRequiredCrds) {
    client::ObjectPtr crd = crds_.indexer().Get(std::string(name));
    if (!crd || machinery::IsBeingDeleted(*crd) ||
        !reconcile::IsConditionTrue(*crd, "Established")) {
      ready = false;
    }
  }
  return ready;
}

core::Result<Result> ApisReconciler::StartRuntime() {
  auto runtime = std::make_unique<Runtime>(manager_, options_, clock_, events_);
  if (auto s = runtime->Start(); !s.ok()) {
    runtime->Stop();
    return s;
  }
  KLUTCH_LOG(kInfo, "provider-anynines",
             "dataservices.anynines.com APIs found: controllers started");
  core::MutexLock lock(mu_);
  if (stopped_) {
    runtime->Stop();
    return Result::Done();
  }
  runtime_ = std::move(runtime);
  return Result::Done();
}

void ApisReconciler::Stop() {
  std::unique_ptr<Runtime> runtime;
  {
    core::MutexLock lock(mu_);
    stopped_ = true;
    runtime.swap(runtime_);
  }
  if (runtime) runtime->Stop();
}

bool ApisReconciler::running() const {
  core::MutexLock lock(mu_);
  return runtime_ != nullptr;
}

}  // namespace klutch::providers::anynines
