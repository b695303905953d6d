// The claim CRD `klutch manager` generates for an XRD (compose::CrdsForXrd), for tests and
// benchmarks that serve Klutch's claim APIs without running the manager. Header-only; link
// klutch_compose.
#pragma once

#include <cstdio>
#include <cstdlib>

#include "compose/xrd.h"

namespace klutch::testing {

// Aborts (a broken fixture, not a test outcome) when the XRD offers no claim.
inline machinery::Json ClaimCrd(const machinery::Json& xrd) {
  auto crds = compose::CrdsForXrd(xrd);
  if (!crds.ok() || !crds->claim) {
    std::fprintf(stderr, "cannot generate the claim CRD: %s\n",
                 crds.ok() ? "the XRD offers no claim" : crds.status().message().c_str());
    std::abort();
  }
  return *crds->claim;
}

}  // namespace klutch::testing
