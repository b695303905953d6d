// Syntax checks for names, labels and keys with the messages kube-apiserver returns (they
// reach users verbatim through kubectl, so they follow Kubernetes' wording).
//
// Each Is* function returns the list of problems, empty when valid. Pure; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "machinery/json.h"

namespace klutch::machinery {

std::vector<std::string> IsDns1123Label(std::string_view value);
std::vector<std::string> IsDns1123Subdomain(std::string_view value);
// A label key or annotation key: optional DNS-subdomain prefix, '/', name part.
std::vector<std::string> IsQualifiedName(std::string_view value);
std::vector<std::string> IsValidLabelValue(std::string_view value);
// ConfigMap and Secret data keys.
std::vector<std::string> IsConfigMapKey(std::string_view value);

// `text` with each whole occurrence of the name `name` (a DNS label, e.g. a namespace) as
// `with`: an occurrence counts when the characters around it are not [a-z0-9-], so
// "team-a" is not found in "team-ab" or "my-team-a". For prose that names a namespace of
// one cluster and is shown in another's terms.
std::string ReplaceWholeName(const std::string& text, std::string_view name, std::string_view with);

// How a kind's names are checked (apimachinery's ValidateNameFunc): NameIsDNSSubdomain,
// NameIsDNSLabel, path.ValidatePathSegmentName.
enum class NameRule { kDns1123Subdomain, kDns1123Label, kPathSegment };

// Validates the common metadata of an object being written, as apimachinery's
// ValidateObjectMetaAccessor does and in its order: generateName (by `rule`, as a prefix),
// name (by `rule`), namespace (required and a DNS label when `namespaced`, forbidden
// otherwise), generation (not negative), labels, annotations (keys and the 256 KiB total),
// ownerReferences, finalizers. Appends causes with kube-apiserver's field paths and messages
// under "metadata." (owner references and finalizers are reported unindexed, as upstream).
// metadata.managedFields is checked where managed fields are decoded (managed_fields.h).
void ValidateObjectMeta(const Json& metadata, bool namespaced, NameRule rule,
                        std::vector<core::Cause>& causes);

}  // namespace klutch::machinery
