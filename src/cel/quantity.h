// Kubernetes resource quantities ("500m", "2Gi", "1.5", "1e3"), as
// k8s.io/apimachinery/pkg/api/resource.ParseQuantity reads them: the one parser behind CEL's
// quantity library (quantity(), isQuantity(), implemented in k8s_quantity.cc) and the OpenAPI
// "quantity" format of custom resource schemas (src/schema).
//
// Pure function; thread-safe.
#pragma once

#include <optional>
#include <string_view>

namespace klutch::cel {

// Whether resource.ParseQuantity accepts `text`: an optional sign, decimal digits with an
// optional fraction (either part may be empty: "-", "." and "1." are zero and one), then an
// optional suffix: a decimal SI one (n, u, m, k, M, G, T, P, E), a binary one (Ki ... Ei) or an
// exponent (e3, E-2). Values too large for the exact arithmetic of quantity() are still
// quantities here, as in Kubernetes.
bool IsQuantity(std::string_view text);

// The value of a quantity as a double (what comparisons against limits need: composition
// transforms, ResourceQuota hard values); nullopt when IsQuantity says no.
std::optional<double> QuantityAsDouble(std::string_view text);

}  // namespace klutch::cel
