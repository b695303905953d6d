// XrdTypes: the composite (XR) and claim types one CompositeResourceDefinition defines, as the
// XRD, claim and composite reconcilers address them. A value type.
#pragma once

#include <string>

#include "client/dynamic.h"
#include "core/status.h"
#include "machinery/json.h"

namespace klutch::compose {

struct XrdTypes {
  client::GroupVersionResource xr;
  std::string xr_kind;
  client::GroupVersionResource claim;  // resource "" when the XRD offers no claim
  std::string claim_kind;
  std::string ApiVersion() const { return xr.group + "/" + xr.version; }
  bool operator==(const XrdTypes&) const = default;
};

// The types of `xrd`: its group, names, claimNames and referenceable version (else its
// first). BadRequest when the XRD names no group, plural or version.
core::Result<XrdTypes> XrdTypesOf(const machinery::Json& xrd);

}  // namespace klutch::compose
