#include "compose/composition_revision_reconciler.h"

#include <algorithm>
#include <vector>

#include "compose/names.h"
#include "compose/object_helpers.h"
#include "compose/selection.h"
#include "compose/xrd.h"
#include "machinery/object.h"
#include "reconcile/committer.h"
#include "reconcile/events.h"

namespace klutch::compose {

using client::Json;
using client::ObjectPtr;
using machinery::Find;
using machinery::GetString;
using reconcile::Result;

core::Result<Result> CompositionRevisionReconciler::Reconcile(const reconcile::Request& r) {
  ObjectPtr comp = context_.compositions->indexer().Get(r.Key());
  if (!comp || machinery::IsBeingDeleted(*comp)) return Result::Done();
  const Json* spec = Find(*comp, {"spec"});
  Json spec_copy = spec ? *spec : Json::object();
  const std::string hash = machinery::JsonHash(spec_copy);
  int64_t max = 0;
  const Json* same = nullptr;
  std::vector<ObjectPtr> revisions = context_.revisions->indexer().List();
  for (const auto& rev : revisions) {
    if (GetString(*rev, {"metadata", "labels", kLabelCompositionName}) != r.name) continue;
    max = std::max(max, RevisionNumber(*rev));
    if (GetString(*rev, {"metadata", "labels", kLabelCompositionHash}) == hash) same = rev.get();
  }
  if (same && RevisionNumber(*same) == max) return Result::Done();  // the usual case
  // A revision is about to be numbered: ask the server, not a cache that may not have seen
  // the one created a moment ago (two revisions with the same number would tie "newest").
  client::ResourceClient revs(context_.rest(), kCompositionRevisions);
  auto live = revs.List({.label_selector = std::string(kLabelCompositionName) + "=" + r.name});
  if (!live.ok()) return live.status();
  revisions.clear();
  if (const Json* items = Find(*live, {"items"}); items && items->is_array()) {
    for (const Json& item : *items) revisions.push_back(std::make_shared<const Json>(item));
  }
  max = 0;
  same = nullptr;
  for (const auto& rev : revisions) {
    max = std::max(max, RevisionNumber(*rev));
    if (GetString(*rev, {"metadata", "labels", kLabelCompositionHash}) == hash) same = rev.get();
  }
  if (same) {
    if (RevisionNumber(*same) < max) {  // reverted to an older spec: it becomes the newest
      Json modified = *same;
      modified["spec"]["revision"] = max + 1;
      auto w = reconcile::Committer(revs, std::string(kFieldManager)).Commit(*same, modified);
      if (!w.ok()) return w.status();
    }
    return Result::Done();
  }
  Json rev_spec = spec_copy;
  rev_spec["revision"] = max + 1;
  Json revision{{"apiVersion", "apiextensions.crossplane.io/v1"},
                {"kind", "CompositionRevision"},
                {"metadata", Json{{"name", DerivedName(r.name, hash, 253)},
                                  {"labels", Json{{std::string(kLabelCompositionName), r.name},
                                                  {std::string(kLabelCompositionHash), hash}}},
                                  {"ownerReferences", Json::array({ControllerRef(*comp)})}}},
                {"spec", rev_spec}};
  auto created = revs.Create(revision);
  if (!created.ok() && !core::IsAlreadyExists(created.status())) {
    if (core::IsInvalid(created.status())) {
      context_.events.Event(*comp, reconcile::kEventTypeWarning, "InvalidComposition",
                            "cannot create a CompositionRevision: " + created.status().message());
      return Result::Done();
    }
    return created.status();
  }
  return Result::Done();
}

}  // namespace klutch::compose
