// Decoding of Kubernetes protobuf request bodies (Content-Type
// application/vnd.kubernetes.protobuf) into the project's JSON object model.
//
// kubectl's typed commands (create namespace/configmap/secret/..., create token, auth can-i,
// auth whoami) and every client-go typed client send protobuf with no JSON fallback, so the API
// server turns such a body into the JSON object it would have received from `create -f`, and
// handles it from there like any other JSON request.
//
// Wire format (apimachinery runtime/serializer/protobuf): the 4 bytes "k8s\x00", then a
// runtime.Unknown message {1: typeMeta {1: apiVersion, 2: kind}, 2: raw (the object's message),
// 3: contentEncoding, 4: contentType}. The object message is decoded by table: every supported
// message type is described as data (field number -> JSON name, scalar type, nested message,
// repeated/map, special conversion) in protobuf.cc, using the field numbers of Kubernetes'
// generated.proto files. No generated code is involved.
//
// JSON produced (the "zero value" rule). Go's gogo-protobuf marshals every non-pointer field,
// even when empty, so the wire cannot tell "unset" from "empty". The decoder therefore follows
// Go's `omitempty` JSON encoding of the decoded struct, with these precise rules:
//  - Scalars (string, bool, integers) that hold Go's zero value ("", false, 0) are omitted,
//    unless the Go field is a pointer (e.g. ConfigMap.immutable, Deployment.spec.replicas,
//    Lease.spec.leaseTransitions, DeleteOptions.gracePeriodSeconds): then a value present on the
//    wire is kept even when zero (`immutable: false`, `replicas: 0`).
//  - Time and MicroTime equal to zero (an empty message, {0,0}, or Go's zero time) are omitted
//    (Go writes `null`); otherwise Time is RFC 3339 in UTC with whole seconds
//    ("2024-05-01T10:00:00Z") and MicroTime has exactly 6 fractional digits
//    ("2024-05-01T10:00:00.123456Z"), truncated like Go's formatting.
//  - IntOrString becomes a JSON number (type 0) or string (type 1); a zero one (0 or "") is
//    omitted unless the Go field is a pointer (RollingUpdateDeployment.maxUnavailable: 0).
//    Quantity becomes its string form; an empty one is omitted. bytes become standard base64
//    (Secret.data, ConfigMap.binaryData). FieldsV1 (managedFields[].fieldsV1) holds JSON bytes
//    and becomes that JSON object.
//  - A nested message present on the wire is always emitted, as {} when all its fields are
//    zero: Go writes non-pointer structs always and pointer structs only when set, which is
//    exactly what Go's JSON encoding shows (`"spec": {}`, `"status": {}`, `"resources": {}`).
//  - Repeated fields and maps keep every element, including empty strings (`apiGroups: [""]`)
//    and empty map values (`data: {"k": ""}`).
//  - Exceptions where emptiness carries meaning: RoleRef.apiGroup/kind/name and
//    PolicyRule.verbs are always emitted ("" and [] when empty, like Go's non-omitempty
//    fields); Subject.apiGroup and Subject.namespace are kept whenever they are on the wire,
//    even when "" ("" apiGroup is the core group of a ServiceAccount subject).
//  - `apiVersion` and `kind` are set from the envelope.
//
// Errors. The body never reaches a store or handler half-decoded:
//  - not the "k8s\x00" magic, malformed wire data (bad varint, length beyond the end, wrong
//    wire type for a known field, group wire types), invalid UTF-8 in a string, out-of-range
//    Time, invalid IntOrString, FieldsV1 that is not a JSON object, nesting deeper than
//    ProtobufDecodeOptions::max_depth -> BadRequest, message naming the object type and the
//    JSON path of the field (e.g. "metadata.labels");
//  - a field number the table does not know inside a known message -> BadRequest naming the
//    message and the field number (data is never dropped silently);
//  - an (apiVersion, kind) without a table, a non-empty contentEncoding, or a contentType other
//    than protobuf -> UnsupportedMediaType naming them.
// Every read is bounds-checked; any byte string yields either a value or a Status.
//
// Thread-safe: the tables are immutable after first use.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "machinery/json.h"

namespace klutch::machinery {

// The media type of Kubernetes protobuf bodies.
inline constexpr std::string_view kKubernetesProtobufContentType =
    "application/vnd.kubernetes.protobuf";

struct ProtobufDecodeOptions {
  // Messages nested deeper than this (the object itself is depth 1) are rejected with
  // BadRequest. The supported types nest at most about 12 levels.
  int max_depth = 32;
};

// Decodes one Kubernetes protobuf body (magic + runtime.Unknown envelope) into a JSON object
// with `apiVersion` and `kind` set, following the rules in the header comment. Errors:
// BadRequest for malformed data or unknown field numbers, UnsupportedMediaType for an
// (apiVersion, kind) without a message table. `body` is only read during the call.
core::Result<Json> DecodeKubernetesProtobuf(std::string_view body);
core::Result<Json> DecodeKubernetesProtobuf(std::string_view body,
                                            const ProtobufDecodeOptions& options);

// The (apiVersion, kind) pairs DecodeKubernetesProtobuf accepts, in table order. DeleteOptions
// is listed once with apiVersion "*": client-go stamps it with the group version of the client
// that sends it (e.g. "apps/v1"), and the decoder accepts it under any apiVersion.
std::vector<std::pair<std::string, std::string>> ProtobufDecodableKinds();

}  // namespace klutch::machinery
