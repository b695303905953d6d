// ClaimReconciler (klutch-konnector-claimed-<group resource>[-<owner>], bind-protocol.md §4.13),
// on provider keys "<provider namespace>/<name>" of one accepted permission claim: a Secret or
// ConfigMap the claim names, in a mapped namespace. The side that owns the object (the
// `klutch.anynines.com/resource-owner` annotation, else the side it was created on) is the
// truth: a pass marks the owner's object, then creates, overwrites or deletes the other side's
// copy to match it. A claim with an owner handles only objects of that owner; an object of the
// same name the other side made on its own is left alone with a Warning Event. Reads the
// caches ClaimSyncer owns; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "client/multi_namespace_informer.h"
#include "konnector/context.h"
#include "reconcile/controller.h"

namespace klutch::konnector::internal {

class Connection;

class ClaimReconciler final : public reconcile::Reconciler {
 public:
  // `owner`: the claim's selector.owner ("" = either); `names`: its selector.names. The
  // connection and both caches must outlive the reconciler.
  ClaimReconciler(Connection& connection, client::GroupVersionResource gvr, std::string owner,
                  std::vector<std::string> names, client::Informer& consumer,
                  client::MultiNamespaceInformer& provider);
  core::Result<reconcile::Result> Reconcile(const reconcile::Request& request) override;

  // The claim's names, and never a service-account token.
  bool Matches(const Json& object) const;
  // "Provider" or "Consumer": the annotation, else the side the object was seen on.
  static std::string EffectiveOwner(const Json& object, bool provider_side);

 private:
  struct Pass;  // what the steps of one reconcile share

  // Which side owns the object (source and copy set); false when this claim does not handle
  // objects of that owner.
  bool DecideOwner(Pass& pass) const;
  // True (with a Warning Event) when the copy's side made an object of that name on its own.
  bool ReportConflict(const Pass& pass);
  core::Result<reconcile::Result> Sync(Pass& pass);
  // The owner's object is gone or going: the copy goes too, once the API server confirms it.
  core::Result<reconcile::Result> DeleteCopy(Pass& pass);
  // The owner annotation on the owner's object; ends the pass when it had to be written.
  reconcile::Step MarkOwner(Pass& pass);
  core::Result<reconcile::Result> UpdateCopy(Pass& pass);

  Connection& connection_;
  Context& ctx_;
  const client::GroupVersionResource gvr_;
  const std::string owner_;
  const std::vector<std::string> names_;
  client::Informer& consumer_;
  client::MultiNamespaceInformer& provider_;
};

}  // namespace klutch::konnector::internal
