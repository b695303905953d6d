#include "compose/xrd_types.h"

#include "machinery/object.h"

namespace klutch::compose {

using machinery::Find;
using machinery::GetString;
using machinery::Json;

core::Result<XrdTypes> XrdTypesOf(const Json& xrd) {
  XrdTypes t;
  t.xr.group = t.claim.group = GetString(xrd, {"spec", "group"});
  t.xr.resource = GetString(xrd, {"spec", "names", "plural"});
  t.xr_kind = GetString(xrd, {"spec", "names", "kind"});
  t.claim.resource = GetString(xrd, {"spec", "claimNames", "plural"});
  t.claim_kind = GetString(xrd, {"spec", "claimNames", "kind"});
  const Json* versions = Find(xrd, {"spec", "versions"});
  if (versions && versions->is_array()) {
    for (const Json& v : *versions) {
      const Json* ref = Find(v, {"referenceable"});
      if (ref && ref->is_boolean() && *ref->get_ptr<const Json::boolean_t*>()) {
        t.xr.version = GetString(v, {"name"});
      }
    }
    if (t.xr.version.empty() && !versions->empty())
      t.xr.version = GetString((*versions)[0], {"name"});
  }
  t.claim.version = t.xr.version;
  if (t.xr.group.empty() || t.xr.resource.empty() || t.xr.version.empty()) {
    return core::BadRequest("the XRD names no group, plural or version");
  }
  return t;
}

}  // namespace klutch::compose
