// Committer: the safe way a reconciler writes back what it changed.
//
// A reconcile pass computes a modified copy of the object it read and commits either its
// spec/metadata or its status, never both (ARCHITECTURE.md §6.7). The committer sends only
// the difference as a JSON merge patch that also carries the resourceVersion that was read,
// so a write based on a stale read fails with Conflict instead of overwriting someone
// else's change; nothing is sent when nothing changed. Thread-safe (stateless).
#pragma once

#include <string>

#include "client/dynamic.h"

namespace klutch::reconcile {

using client::Json;

class Committer {
 public:
  Committer(client::ResourceClient resource, std::string field_manager)
      : resource_(std::move(resource)), field_manager_(std::move(field_manager)) {}

  // Writes the changes of `modified` against `original` outside `status`. Returns the
  // object as stored (or `original` when there was nothing to write). Conflict when the
  // object changed since `original` was read.
  core::Result<Json> Commit(const Json& original, const Json& modified) const;
  // Writes the changes to `status` through the status subresource.
  core::Result<Json> CommitStatus(const Json& original, const Json& modified) const;

 private:
  core::Result<Json> Send(const Json& original, Json patch, std::string_view subresource) const;
  client::ResourceClient resource_;
  std::string field_manager_;
};

}  // namespace klutch::reconcile
