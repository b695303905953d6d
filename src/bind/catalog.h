// The catalog of APIs this Control Plane offers to consumers (bind-protocol.md §1.7, §2.2.3):
// a CustomResourceDefinition is offered when some APIServiceExportTemplate (in any namespace)
// selects its group and plural. The catalog is read live from the API server on each call
// (templates and CRDs are few; the backend is stateless). Thread-safe (no state).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "client/rest_client.h"
#include "core/status.h"
#include "machinery/json.h"

namespace klutch::bind {

struct OfferedApi {
  std::string group, resource, kind, scope;  // resource = CRD plural; scope Namespaced|Cluster
  // From the CRD's top-level schema description (or the spec's), "" if none.
  std::string description;
  // The plans a claim may name: the enum of spec.plan (or spec.parameters.plan) in the storage
  // version's schema; without one, the names spec's validation rules allow
  // (`self.plan == '<name>'`, how Klutch's PostgreSQL XRD lists them). Empty if neither.
  std::vector<std::string> plans;
  // When those rules tie plans to Compositions (`self.compositionRef.name == '<c>' && (...)`):
  // the plans of each Composition, in the rule's order (ListOfferedApis keeps only the
  // Compositions that exist); `plans` is then the union of what is kept. Empty otherwise.
  struct PlanGroup {
    std::string composition;
    std::vector<std::string> plans;
  };
  std::vector<PlanGroup> plans_by_composition;
  std::vector<std::string> versions;  // served versions, in the CRD's order
  machinery::Json permission_claims;  // the template's spec.permissionClaims (array, maybe empty)
  std::string template_namespace, template_name;
  std::string crd_name;  // "<resource>.<group>", also the APIServiceExport's name
  std::string singular;  // the CRD's singular name
};

// All templates (any namespace) whose APIServiceSelector matches an existing CRD, sorted by
// CRD name; cluster-scoped CRDs are hidden when `consumer_scope` is "Namespaced"
// (case-insensitive). When several templates select one CRD, the first by namespace/name wins.
// Plans per Composition are narrowed to the Compositions on the Control Plane (all are kept
// when Compositions cannot be listed, e.g. no Crossplane CRDs).
// Errors: the API server's (e.g. Forbidden when `admin` may not list CRDs or templates).
core::Result<std::vector<OfferedApi>> ListOfferedApis(client::RestClient& admin,
                                                      const std::string& consumer_scope);
// The one for (group, resource); kNotFound naming group and resource if not offered.
core::Result<OfferedApi> FindOfferedApi(client::RestClient& admin,
                                        const std::string& consumer_scope, const std::string& group,
                                        const std::string& resource);

// The pure core of both, for callers holding the objects already (the controllers' caches):
// the offered APIs among `crds` selected by `templates`, as ListOfferedApis describes.
std::vector<OfferedApi> OfferedApisFrom(const std::vector<machinery::Json>& templates,
                                        const std::vector<machinery::Json>& crds,
                                        std::string_view consumer_scope);
// Keeps, in `api`'s plans per Composition, only those of `existing` Compositions (by name) and
// makes `plans` their union; a no-op for an API whose plans are not per Composition.
void KeepPlansOfCompositions(OfferedApi& api, const std::vector<std::string>& existing);
// True when `consumer_scope` is "Namespaced" (case-insensitive): cluster-scoped APIs are hidden.
bool HidesClusterScoped(std::string_view consumer_scope);

}  // namespace klutch::bind
