// Binding credentials as provider-anynines publishes them: the broker's `credentials` object
// flattened into the connection Secret's keys (data-services.md §5.4), and the endpoints a
// ServiceBinding's status.atProvider.connectionDetails lists, parsed from those keys by data
// service type (§6.4).
//
// Pure functions; thread-safe.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "core/status.h"
#include "machinery/json.h"

namespace klutch::providers::anynines {

using machinery::Json;

// Secret key -> value (not yet base64-encoded).
using SecretData = std::map<std::string, std::string>;

// §5.4: nested objects flattened with '.'-joined keys; in each key segment every character
// outside [-._a-zA-Z0-9] replaced by '_'; values rendered as Go's fmt.Sprint renders them
// after encoding/json decoded them (numbers are float64: 5432, 1e+06; arrays [a b]; null
// <nil>); then a top-level key is dropped when some dotted key ends in a segment of that name
// with a byte-identical value. A non-object `credentials` gives no keys.
SecretData FlattenCredentials(const Json& credentials);

// §6.4: the endpoints of a binding as `[{hostURL, port, label}]`, chosen by the data service
// type (the MR's `klutch.io/instance-type` label; substring match in the order search, logme2,
// mongodb, prometheus, messaging, keyvalue, postgresql/mariadb). A list value ("[a b]") gives
// one entry per element. kInvalid with upstream's wording when a required key is missing
// (`"host" field not found in secret`), a value is malformed, or the type is unknown
// (`referenced data service not found.`).
core::Result<Json> ParseConnectionDetails(std::string_view instance_type, const SecretData& data);

}  // namespace klutch::providers::anynines
