// Decoding of Kubernetes protobuf request bodies (Content-Type
// application/vnd.kubernetes.protobuf) into the project's JSON object model.
//
// kubectl's typed commands (create namespace/configmap/secret/quota/..., create token, auth
// can-i, auth whoami) and every client-go typed client send protobuf with no JSON fallback, so
// the API server turns such a body into the JSON object it would have received from
// `create -f`, and handles it from there like any other JSON request.
//
// Wire format (apimachinery runtime/serializer/protobuf): the 4 bytes "k8s\x00", then a
// runtime.Unknown message {1: typeMeta {1: apiVersion, 2: kind}, 2: raw (the object's message),
// 3: contentEncoding, 4: contentType}. The object message is decoded by table. The tables are
// not written here: they are derived, at first use, from the OpenAPI schemas of the built-in
// kinds (apis::AnnotatedBuiltinSchemas()), whose properties carry their field numbers of
// Kubernetes' generated.proto files as `x-klutch-protobuf` annotations. Everything else follows
// from the schema: the JSON name is the property name; arrays are repeated fields and objects
// with additionalProperties are maps; string, boolean and integer (int32/int64) properties are
// scalars, format byte is bytes; references to meta/v1 Time and MicroTime, resource.Quantity,
// intstr.IntOrString and meta/v1 FieldsV1 are those well-known messages, and a reference to any
// other definition is a nested message derived the same way. A kind is decodable when its
// definition (one with x-kubernetes-group-version-kind) is annotated; meta/v1 DeleteOptions is
// accepted under every apiVersion.
//
// JSON produced (the "zero value" rule). Go's gogo-protobuf marshals every non-pointer field,
// even when empty, so the wire cannot tell "unset" from "empty". The decoder therefore follows
// Go's `omitempty` JSON encoding of the decoded struct, with these precise rules:
//  - Scalars (string, bool, integers) that hold Go's zero value ("", false, 0) are omitted,
//    unless the Go field is a pointer (annotated `ptr`; e.g. ConfigMap.immutable,
//    Deployment.spec.replicas, Lease.spec.leaseTransitions, DeleteOptions.gracePeriodSeconds):
//    then a value present on the wire is kept even when zero (`immutable: false`,
//    `replicas: 0`).
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
//    PolicyRule.verbs are always emitted (annotated `always`: "" and [] when empty, like Go's
//    non-omitempty fields); Subject.apiGroup is kept whenever it is on the wire, even when ""
//    (annotated `ptr`: "" is the core group of a ServiceAccount subject).
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
// Thread-safe: the tables are immutable once derived.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "machinery/json.h"

namespace klutch::codec {

// The media type of Kubernetes protobuf bodies.
inline constexpr std::string_view kKubernetesProtobufContentType =
    "application/vnd.kubernetes.protobuf";

struct ProtobufDecodeOptions {
  // Messages nested deeper than this (the object itself is depth 1) are rejected with
  // BadRequest. The built-in types nest at most about 12 levels.
  int max_depth = 32;
};

// The message tables derived from a set of annotated OpenAPI definitions, and the decoder
// that reads bodies with them. Immutable; safe to share between threads.
class ProtobufTypes {
 public:
  // Derives the tables from `schemas` (definition name -> schema, annotated as
  // apis/builtin_schemas.h describes). Invalid naming the definition and property when an
  // annotation is malformed, a property of a decodable message lacks one, or a property's schema
  // has no protobuf form (such as a date-time string that is not a reference to Time).
  static core::Result<std::shared_ptr<const ProtobufTypes>> Derive(const machinery::Json& schemas);

  // The tables of the built-in kinds, derived from apis::AnnotatedBuiltinSchemas() on the first
  // call (from any thread). Aborts when that derivation fails: the schemas are build inputs,
  // and every test that decodes reaches this.
  static const ProtobufTypes& Builtin();

  // Decodes one Kubernetes protobuf body (magic + runtime.Unknown envelope) into a JSON object
  // with `apiVersion` and `kind` set, following the rules in the header comment. Errors:
  // BadRequest for malformed data or unknown field numbers, UnsupportedMediaType for an
  // (apiVersion, kind) without a message table. `body` is only read during the call.
  core::Result<machinery::Json> Decode(std::string_view body,
                                       const ProtobufDecodeOptions& options) const;

  // The decodable (apiVersion, kind) pairs, sorted. DeleteOptions is listed once with
  // apiVersion "*": client-go stamps it with the group version of the client that sends it
  // (e.g. "apps/v1"), and the decoder accepts it under any apiVersion.
  std::vector<std::pair<std::string, std::string>> Kinds() const;

  // The definition whose annotations the message of (apiVersion, kind) was derived from, such
  // as "io.k8s.api.core.v1.ConfigMap"; "" when the kind is not decodable.
  std::string SchemaFor(std::string_view api_version, std::string_view kind) const;

  // The derived tables (defined in protobuf.cc); use Derive() or Builtin() to get some.
  struct Tables;
  explicit ProtobufTypes(std::unique_ptr<const Tables> tables);
  ~ProtobufTypes();
  ProtobufTypes(const ProtobufTypes&) = delete;
  ProtobufTypes& operator=(const ProtobufTypes&) = delete;

 private:
  std::unique_ptr<const Tables> tables_;
};

// ProtobufTypes::Builtin().Decode(body, options).
core::Result<machinery::Json> DecodeKubernetesProtobuf(std::string_view body);
core::Result<machinery::Json> DecodeKubernetesProtobuf(std::string_view body,
                                                       const ProtobufDecodeOptions& options);

// ProtobufTypes::Builtin().Kinds().
std::vector<std::pair<std::string, std::string>> ProtobufDecodableKinds();

}  // namespace klutch::codec
