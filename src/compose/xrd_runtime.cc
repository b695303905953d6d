#include "compose/xrd_runtime.h"

#include <vector>

#include "compose/xrd.h"
#include "core/strings.h"
#include "machinery/object.h"

namespace klutch::compose {

using client::ObjectPtr;
using machinery::GetString;

namespace {
constexpr const char* kByComposition = "composition";
constexpr const char* kUnbound = "unbound";  // claims without spec.resourceRef
}  // namespace

void XrdRuntime::StartComposite() {
  client::InformerOptions o{.compact = true, .clock = &context_.clock};
  xrs_ = std::make_unique<client::Informer>(context_.rest(), types_.xr, o);
  (void)xrs_->indexer().AddIndex(kByComposition, [](const client::Json& xr) {
    std::string c = GetString(xr, {"spec", "compositionRef", "name"});
    return c.empty() ? std::vector<std::string>{} : std::vector<std::string>{c};
  });
  xr_reconciler_ = std::make_unique<CompositeReconciler>(context_, xrd_, types_, *xrs_, xr_writes_);
  xr_controller_ = std::make_unique<reconcile::Controller>(
      "klutch-manager-" + core::ToLower(types_.xr_kind), *xr_reconciler_,
      reconcile::ControllerOptions{.workers = context_.options.workers,
                                   .metrics = &context_.manager.metrics(),
                                   .clock = &context_.clock});
  xr_controller_->For(*xrs_);
  // A deleted XR may unblock its XRD's deletion.
  reconcile::Controller* xrd_controller = context_.xrd_controller;
  std::string xrd = xrd_;
  xrs_->AddEventHandler(
      {.on_delete = [xrd_controller, xrd](const ObjectPtr&) { xrd_controller->queue().Add(xrd); }});
  xrs_->Start();
  xr_controller_->Start();
}

void XrdRuntime::StartClaim() {
  if (!xrs_) return;
  client::InformerOptions o{.compact = true, .clock = &context_.clock};
  claims_ = std::make_unique<client::Informer>(context_.rest(), types_.claim, o);
  (void)claims_->indexer().AddIndex(kUnbound, [](const client::Json& claim) {
    return GetString(claim, {"spec", "resourceRef", "name"}).empty()
               ? std::vector<std::string>{kUnbound}
               : std::vector<std::string>{};
  });
  claim_reconciler_ = std::make_unique<ClaimReconciler>(context_, xrd_, types_, *claims_, *xrs_,
                                                        claim_writes_, xr_writes_);
  claim_controller_ = std::make_unique<reconcile::Controller>(
      "klutch-manager-" + core::ToLower(types_.claim_kind), *claim_reconciler_,
      reconcile::ControllerOptions{.workers = context_.options.workers,
                                   .metrics = &context_.manager.metrics(),
                                   .clock = &context_.clock});
  claim_controller_->For(*claims_);
  claim_controller_->Watches(*xrs_, reconcile::MapByLabels(std::string(kLabelClaimNamespace),
                                                           std::string(kLabelClaimName)));
  reconcile::Controller* xrd_controller = context_.xrd_controller;
  std::string xrd = xrd_;
  claims_->AddEventHandler(
      {.on_delete = [xrd_controller, xrd](const ObjectPtr&) { xrd_controller->queue().Add(xrd); }});
  claims_->Start();
  claim_controller_->Start();
}

void XrdRuntime::Stop() {
  if (claim_controller_) claim_controller_->Stop();
  if (xr_controller_) xr_controller_->Stop();
  if (claims_) claims_->Stop();
  if (xrs_) xrs_->Stop();
}

void XrdRuntime::EnqueueUsers(const std::string& composition) {
  if (!xr_controller_) return;
  for (const auto& xr : xrs_->indexer().ByIndex(kByComposition, composition)) {
    xr_controller_->queue().Add(machinery::Name(*xr));
  }
}

void XrdRuntime::EnqueueUnboundClaims() {
  if (!claim_controller_) return;
  for (const auto& c : claims_->indexer().ByIndex(kUnbound, kUnbound)) {
    claim_controller_->queue().Add(machinery::Namespace(*c) + "/" + machinery::Name(*c));
  }
}

}  // namespace klutch::compose
