// CompositionRevisionReconciler (klutch-manager-compositionrevision): one immutable
// CompositionRevision per distinct spec of a Composition (labels composition name and spec
// hash, controlled by the Composition), numbered upwards; a Composition reverted to an older
// spec makes that revision the newest again. Numbers are taken from the server, not the
// cache, so two revisions never tie. Thread-safe.
#pragma once

#include "compose/compose_context.h"
#include "reconcile/controller.h"

namespace klutch::compose {

class CompositionRevisionReconciler final : public reconcile::Reconciler {
 public:
  explicit CompositionRevisionReconciler(ComposeContext& context) : context_(context) {}
  core::Result<reconcile::Result> Reconcile(const reconcile::Request& request) override;

 private:
  ComposeContext& context_;
};

}  // namespace klutch::compose
