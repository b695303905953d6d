// The OpenAPI v3 component schemas of the built-in kinds our API server serves (core/v1
// Namespace, ConfigMap, Secret, ServiceAccount, Event, Service; apps/v1 Deployment; RBAC;
// coordination Lease; events.k8s.io Event; CustomResourceDefinition; the authentication and
// authorization reviews) and the meta/v1 types they use.
//
// The schemas are data (src/apis/builtin/*.yaml) embedded in the binary and parsed on first use.
// They carry what kubectl and our patch/apply code read: types and formats, required fields,
// x-kubernetes-group-version-kind on top-level kinds, and the list/map/patch metadata
// (x-kubernetes-list-type, -list-map-keys, -map-type, -patch-strategy, -patch-merge-key).
// References have Kubernetes' shape, {"allOf":[{"$ref":"#/components/schemas/<name>"}]}, so
// machinery::SchemaCursor walks them directly. Thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "machinery/json.h"

namespace klutch::apis {

// The merged `components.schemas` object as the API server serves it: definition name (such as
// "io.k8s.api.core.v1.ConfigMap") to schema, with Klutch's own annotations (the x-klutch-* keys
// below) removed. Parsed once, on the first call, from any thread; the returned object lives
// until the process exits and is never modified. Aborts if the embedded data is malformed,
// which is a build defect, not an input error.
const machinery::Json& BuiltinSchemas();

// The same definitions with Klutch's annotations kept, for the code derived from them (src/codec
// builds its protobuf message tables from these; see README.md):
//  - `x-klutch-protobuf` on a property: its protobuf field number in Kubernetes' generated.proto,
//    as an integer, or a string "<number>[,ptr|,always]" ("ptr": a Go pointer field, whose zero
//    value on the wire is kept; "always": a Go field without omitempty, emitted even when
//    absent), "<embedded>.<number>" for a field of an embedded Go struct, or "none" for a field
//    the protobuf decoder deliberately does not read;
//  - `x-klutch-protobuf-embedded` on a definition: {<field number>: <message name>} for each Go
//    struct embedded in it (`json:",inline"`), whose fields appear among its properties.
// Same lifetime and thread-safety as BuiltinSchemas().
const machinery::Json& AnnotatedBuiltinSchemas();

// The definition name whose x-kubernetes-group-version-kind lists {group, version, kind}, such
// as "io.k8s.api.apps.v1.Deployment" for ("apps", "v1", "Deployment"); "" when no built-in
// schema declares that kind. The core group is the empty string. Case-sensitive.
std::string SchemaNameFor(std::string_view group, std::string_view version, std::string_view kind);

}  // namespace klutch::apis
