// OpenAPI v3 documents for every served group-version (built-ins from src/apis, custom
// resources from their CRD schemas), as kubectl reads them for field validation, patch
// computation and `kubectl explain`. Documents are rebuilt lazily when the Registry changes
// and served with content hashes so clients can cache them. Thread-safe.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "apiserver/resource.h"
#include "core/sync.h"

namespace klutch::apiserver {

class OpenApi {
 public:
  explicit OpenApi(const Registry& registry) : registry_(registry) {}

  struct Document {
    std::string body;  // serialized JSON
    std::string hash;  // changes whenever body changes
  };

  // The root document (`/openapi/v3`) listing every group-version path.
  std::string Root();
  // The document for "api/v1" or "apis/<group>/<version>"; nullptr when not served.
  std::shared_ptr<const Document> ForPath(std::string_view path);
  // The whole API as one Swagger 2.0 document (`/openapi/v2`), converted from the v3
  // documents: as JSON and as gnostic's protobuf encoding (what kubectl asks for).
  std::shared_ptr<const Document> V2Json();
  std::shared_ptr<const Document> V2Protobuf();

 private:
  struct Snapshot {
    uint64_t generation = 0;
    std::string root;
    std::map<std::string, std::shared_ptr<const Document>, std::less<>> docs;
    std::shared_ptr<const Document> v2_json;
    std::shared_ptr<const Document> v2_protobuf;
  };
  std::shared_ptr<const Snapshot> Current() EXCLUDES(mu_);

  const Registry& registry_;
  core::Mutex mu_;
  std::shared_ptr<const Snapshot> snapshot_ GUARDED_BY(mu_);
};

}  // namespace klutch::apiserver
