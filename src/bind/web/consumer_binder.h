// ConsumerBinder: the bind operation behind /bind and the device grant (bind-protocol.md
// §2.4): checks the request and that the API is offered, provisions the consumer's space on the
// Control Plane (bind/provision.h; a cap of clusters per user), records the cluster's name, and
// answers the BindingResponse (src/apis/klutch) or a typed error the HTTP fronts map to a page
// or an OAuth error. Nothing is written before every check has passed. Thread-safe.
#pragma once

#include <string>
#include <variant>

#include "bind/web/web_context.h"
#include "machinery/json.h"

namespace klutch::bind {

// Who binds which API from which cluster.
struct BindRequest {
  std::string subject, issuer;
  std::string display_name;  // authentication.oauth2CodeGrant.displayName of the response
  std::string sid, cid;      // kubectl bind's session and cluster IDs
  std::string cluster_name;  // kubectl bind's `n`, "" if none
  std::string group, resource;
};

// Why a bind failed, in the words of a page and of the device grant.
struct BindError {
  int status;  // as an HTTP status
  std::string title, what, todo;
  std::string oauth_error;  // for the device grant's JSON answers
  // The device grant's error_description says what to do too (the CLI prints it).
  bool todo_in_description = false;
};

class ConsumerBinder {
 public:
  // `ctx` must outlive this object.
  explicit ConsumerBinder(const WebContext& ctx) : ctx_(ctx) {}

  // The BindingResponse document for `request`, or why not.
  std::variant<machinery::Json, BindError> Bind(const BindRequest& request) const;

 private:
  // The answer to a user at the cluster limit.
  BindError ClusterLimitReached(const BindRequest& request, const core::Status& refused) const;
  // The cluster's name for the consumer page, on its namespace; a failure only costs the name.
  void RecordClusterName(const std::string& cluster_namespace, const std::string& name) const;

  const WebContext& ctx_;
};

}  // namespace klutch::bind
