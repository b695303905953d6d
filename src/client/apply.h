// Applier: puts manifests into a cluster the way `kubectl apply --server-side
// --force-conflicts` does, for tools that install things (kubectl bind's konnector, the
// sandbox's package and templates). Kinds are resolved through discovery (RestMapper), so a
// custom resource applied right after its CRD is found once the CRD is served (NotFound until
// then: retry). An object whose live version carries the annotation
// bootstrap.klutch.anynines.com/create-only is left as it is. Thread-safe as RestMapper and
// RestClient are.
#pragma once

#include <string>
#include <vector>

#include "client/discovery.h"
#include "client/rest_client.h"
#include "core/status.h"

namespace klutch::client {

struct ApplyOptions {
  std::string field_manager = "klutch";
  bool dry_run = false;  // the server's dry run: validated, nothing stored
};

class Applier {
 public:
  // `rest` must outlive the applier.
  explicit Applier(RestClient& rest) : rest_(rest), mapper_(rest) {}

  // Applies one object (apiVersion, kind, metadata.name required; metadata.namespace for
  // namespaced kinds). Returns the object as stored. kBadRequest naming the object when it is
  // malformed; kNotFound when its kind is not served; server errors as sent.
  core::Result<machinery::Json> Apply(const machinery::Json& object,
                                      const ApplyOptions& options = {});
  // Every document of a YAML stream, in order; stops at the first error (naming `source` and
  // the object).
  core::Status ApplyYaml(std::string_view yaml, const std::string& source,
                         const ApplyOptions& options = {});

  RestMapper& mapper() { return mapper_; }

 private:
  RestClient& rest_;
  RestMapper mapper_;
};

}  // namespace klutch::client
