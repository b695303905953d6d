// Encoding of a Swagger 2.0 (OpenAPI v2) document as gnostic's protobuf message
// `openapi.v2.Document`: the body kube-apiserver serves at GET /openapi/v2 to clients that
// accept "application/com.github.proto-openapi.spec.v2@v1.0+protobuf". kubectl 1.27 asks only
// for that encoding (client-go discovery's OpenAPISchema()) before `create -f`/`apply` (to learn
// whether the PATCH operation of a kind takes `fieldValidation`, and for client-side
// validation) and for `explain --output=plaintext-openapiv2`.
//
// Schema: github.com/google/gnostic-models, openapiv2/OpenAPIv2.proto (proto3; the same numbers
// as the older github.com/googleapis/gnostic copies). Its messages are transcribed as tables in
// openapi_v2.cc and written with codec/wire.h; no generated code is involved. kube-openapi
// produces the body by parsing the JSON document with gnostic's compiler and marshalling the
// result; this encoder writes the same messages directly from JSON:
//  - Objects with fixed keys (Document, Info, Operation, Schema, ...) become messages whose
//    fields are written in field-number order. Keys starting with "x-" become the message's
//    `vendor_extension` NamedAny entries, in key order; other unknown keys are ignored.
//  - Free-form objects (definitions, properties, paths, responses, top-level parameters,
//    securityDefinitions, headers, examples, scopes, security requirements) become repeated
//    Named* {1: name, 2: value} entries in key order (nlohmann::json keeps keys sorted, as Go's
//    encoding/json does for the document kube-apiserver hands to gnostic). Under `paths` only keys
//    starting with "/" are paths; under `paths` and `responses`, "x-" keys are extensions.
//  - oneofs are chosen from the value: a parameter or response holding "$ref" is a JsonReference;
//    a parameter with "in": "body" is a BodyParameter, otherwise the NonBodyParameter sub-schema
//    named by "in" (header, formData, query, path); `additionalProperties` is the boolean or a
//    Schema; a response schema of type "file" is a FileSchema; a security definition is chosen
//    by "type" (and "flow" for oauth2).
//  - `type` (TypeItem) takes a string or an array of strings; a Schema's `items` (ItemsItem) an
//    object or an array of objects.
//  - Any values (default, example, enum entries, vendor extensions) keep their value as text in
//    Any.yaml (field 2). gnostic writes block-style YAML there; this encoder writes compact JSON,
//    which YAML parsers read as the same value. Readers (kube-openapi's util/proto, kubectl's
//    query-param verifier) decode that field with a YAML parser.
//  - Like Go's proto.Marshal, scalars equal to the proto3 default ("", false, 0) are not written,
//    except inside oneofs and repeated fields (`additionalProperties: false` is written). An
//    object present in the JSON is always written, even when empty: kube-openapi tells
//    `properties: {}` apart from no properties.
//  - A JSON null is treated as if the key were absent.
//
// Errors: a known key holding the wrong JSON type (a string where an object belongs, a
// fractional maxLength, ...), invalid UTF-8, a parameter without a supported "in", a security
// definition without a supported "type", or nesting deeper than kMaxJsonDepth -> BadRequest
// naming the JSON path, e.g.
//   invalid Swagger 2.0 document: definitions["io.k8s.api.core.v1.ConfigMap"].properties.data
//   .type: expected a string or an array of strings, got number
// Any JSON value yields bytes or a BadRequest; nothing aborts.
//
// Thread-safe: the tables are immutable after first use.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"
#include "machinery/json.h"

namespace klutch::codec {

// The media type kube-apiserver answers with (Content-Type of the protobuf body).
inline constexpr std::string_view kOpenApiV2ProtobufContentType =
    "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";
// The older spelling that kubectl and client-go put in Accept; kube-apiserver accepts both and
// answers with kOpenApiV2ProtobufContentType.
inline constexpr std::string_view kOpenApiV2ProtobufDeprecatedContentType =
    "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";

// Encodes `swagger` (a Swagger 2.0 document as JSON) as the wire bytes of gnostic's
// openapi.v2.Document, following the rules in the header comment. BadRequest naming the JSON
// path when a known field has the wrong JSON type or the document is not an object. `swagger` is
// only read during the call.
core::Result<std::string> EncodeOpenApiV2Protobuf(const machinery::Json& swagger);

}  // namespace klutch::codec
