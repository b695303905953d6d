// XrdReconciler (klutch-manager-compositeresourcedefinition): reconciles
// CompositeResourceDefinitions. A pass keeps the finalizer, creates or updates the XR and
// claim CRDs (owned by the XRD, never taking over a foreign one), starts (or restarts, when
// the types changed) the XRD's XrdRuntime once a CRD serves, and reports Established and
// Offered. A deleted XRD waits (DeletionBlocked) while claims or XRs exist, then stops its
// runtime and deletes its CRDs. Owns the runtimes. Thread-safe.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "compose/compose_context.h"
#include "compose/xrd_runtime.h"
#include "core/sync.h"
#include "reconcile/controller.h"
#include "reconcile/step.h"

namespace klutch::compose {

class XrdReconciler final : public reconcile::Reconciler {
 public:
  explicit XrdReconciler(ComposeContext& context) : context_(context) {}
  ~XrdReconciler() override { Stop(); }
  core::Result<reconcile::Result> Reconcile(const reconcile::Request& request) override;

  // Calls `fn` with each running runtime of XR type `api_version`, `kind` (under a lock:
  // `fn` only queues).
  void ForEachRuntime(std::string_view api_version, std::string_view kind,
                      const std::function<void(XrdRuntime&)>& fn);
  // Stops every runtime; later reconciles start none. Idempotent.
  void Stop();
  // How many XRDs have running controllers.
  size_t active() const;

 private:
  struct Pass;  // what the steps of one reconcile share

  core::Result<reconcile::Result> Delete(Pass& pass);
  // The kinds ("claim" and XR kinds) of which objects still exist, asked of the server.
  core::Result<std::vector<std::string>> RemainingKinds(Pass& pass);
  core::Status DeleteOwnedCrds(Pass& pass);
  core::Status EnsureFinalizer(Pass& pass);
  reconcile::Step EnsureCrds(Pass& pass);
  // Creates or updates `crd`; whether it is established.
  core::Result<bool> EnsureCrd(Pass& pass, client::Json crd);
  reconcile::Step CrdFailed(Pass& pass, const core::Status& status, std::string_view what);
  reconcile::Step EnsureRuntime(Pass& pass);
  core::Result<reconcile::Result> UpdateStatus(Pass& pass);
  // Established (and Offered) False with `reason`, and a Warning Event.
  core::Result<reconcile::Result> Failed(Pass& pass, std::string_view reason,
                                         const std::string& message);
  void StopRuntime(const std::string& xrd);

  ComposeContext& context_;
  mutable core::Mutex mu_;
  std::map<std::string, std::unique_ptr<XrdRuntime>> runtimes_ GUARDED_BY(mu_);  // by XRD
  bool stopped_ GUARDED_BY(mu_) = false;
};

}  // namespace klutch::compose
