// Filter: the label and field selectors of a list or watch request, compiled once for one
// resource (metadata.name, metadata.namespace and the fields the kind's strategy names) and
// matched against objects. Immutable once made; copies share the compiled form; thread-safe.
#pragma once

#include <memory>
#include <string>

#include "apiserver/resource.h"
#include "core/status.h"

namespace klutch::apiserver {

class Filter {
 public:
  // kBadRequest when a selector does not parse or the field selector names a field the
  // resource does not offer ("field label not supported: <field>").
  static core::Result<Filter> Make(const ResourceInfo& resource, const std::string& labels,
                                   const std::string& fields);
  bool Empty() const;
  // True when the filter only pins metadata.name/metadata.namespace with equalities, which
  // the storage key already decides: no need to look inside objects.
  bool KeyOnly() const;
  bool Matches(const ResourceInfo& resource, const Json& object) const;
  // The namespace or name the field selector pins, for key narrowing ("" if none).
  std::string PinnedName() const;
  std::string PinnedNamespace() const;

  struct Impl;

 private:
  std::shared_ptr<const Impl> impl_;
};

}  // namespace klutch::apiserver
