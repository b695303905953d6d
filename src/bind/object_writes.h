// The writes several of the backend's reconcilers and the provisioning of a consumer make
// alike, with the backend's field manager: create-or-get, and a RoleBinding kept as wanted.
// Stateless; thread-safe as the RestClient is.
#pragma once

#include <string>

#include "client/dynamic.h"
#include "client/rest_client.h"
#include "core/status.h"

namespace klutch::bind {

// Creates `desired`; when it exists already, the server's copy.
core::Result<client::Json> GetOrCreate(const client::ResourceClient& rc,
                                       const client::Json& desired);
// A RoleBinding `name` in `ns` granting ClusterRole (or Role) `role` to the ServiceAccount
// `sa_ns`/`sa_name`; subjects fixed on drift, re-created when the immutable roleRef differs.
core::Status EnsureRoleBinding(client::RestClient& rest, const std::string& ns,
                               const std::string& name, const std::string& role_kind,
                               const std::string& role, const std::string& sa_ns,
                               const std::string& sa_name,
                               const client::Json& labels = client::Json::object());

}  // namespace klutch::bind
