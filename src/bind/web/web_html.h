// The bind backend's pages: the catalog of offered APIs (/resources), the consumer page
// (/consumer) and error pages. Plain server-rendered HTML with one embedded stylesheet, no
// JavaScript, readable on a phone (viewport meta, one-column layout on narrow screens). Every
// piece of text that comes from users, clusters or the identity provider goes through
// http::HtmlEscape.
//
// Pure functions of their views; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "bind/catalog.h"

namespace klutch::bind {

// A whole HTML document: `title` (escaped) and `body_html` (trusted markup) in the layout.
std::string HtmlPage(std::string_view title, std::string_view body_html);

// A link a page offers as its main action (a button-like link).
struct PageAction {
  std::string href;   // a path on this backend, such as "/login?next=%2Fconsumer"
  std::string label;  // plain text
};

// An error page: what went wrong and what to do about it (both plain text, escaped), and
// optionally the link that does it (e.g. "Log in").
std::string ErrorPage(std::string_view title, std::string_view what_happened,
                      std::string_view what_to_do, const PageAction* action = nullptr);

struct LandingView {
  std::string pretty_name;    // the provider's name (--pretty-name)
  std::string export_url;     // https://<backend>/export, what kubectl bind takes
  std::string user;           // who is logged in in this browser; "" = nobody
  bool device_grant = false;  // whether kubectl bind --headless works here
};
// The backend's front page (GET /): what this is, how to bind a cluster with kubectl bind,
// and links to log in, the catalog (/resources) and the consumer page (/consumer).
std::string LandingPage(const LandingView& view);

struct CatalogView {
  // The CLI session, posted back with the choice; "" = a login without kubectl bind: the page
  // lists the APIs and says how to bind them, with no bind buttons.
  std::string sid;
  std::string csrf;  // the session's CSRF token, posted back with the choice
  std::string user;  // who is logged in (email or subject)
  std::string cluster_id;
  // Where the credentials go (host:port of the kubectl bind callback), shown to the user.
  std::string destination;
  std::vector<OfferedApi> apis;
  std::string export_url;  // for the read-only page: what to give kubectl bind
};
// The catalog: per API a card with kind, group, resource, scope, description, versions, plans
// and the permission claims it needs, and a form that POSTs s, group, resource and csrf to
// /bind; its button has the CSS classes "bind" and the resource's plural (e2e tests click
// `button.<plural>`).
std::string CatalogPage(const CatalogView& view);

struct ClaimView {
  std::string kind;
  std::string ns;  // the App Cluster namespace it was made in ("" for cluster-scoped claims)
  std::string provider_ns;  // its namespace on the Control Plane
  std::string name;
  std::string ready;  // "True", "False", "Unknown" or "" (no Ready condition yet)
  std::string reason, message;
};
struct ExportView {
  std::string name;   // "<resource>.<group>"
  std::string ready;  // the APIServiceExport's Connected and Established, the worse of them
  std::string message;
  std::vector<ClaimView> claims;
};
// A namespace of an App Cluster bound to the Control Plane (an APIServiceNamespace).
struct NamespaceView {
  std::string app;       // its name in the App Cluster, such as "default"
  std::string provider;  // the Control Plane namespace made for it
};
struct ClusterView {
  // The App Cluster's name as its user gave it at bind time (kubectl bind's `n`: the
  // kubeconfig context); "" = not known.
  std::string name;
  std::string cluster_namespace;
  std::string cluster_id;
  std::string last_heartbeat;  // RFC 3339, "" = never
  std::string heartbeat_age;   // "42s ago", "" = never
  std::string ready, ready_message;
  std::string konnector_version;
  std::vector<NamespaceView> namespaces;
  std::vector<ExportView> exports;
};
struct ConsumerView {
  std::string user;
  std::string sid;  // for the link back to the catalog; "" = none
  std::vector<ClusterView> clusters;
  std::string error;       // shown above the list when reading the Control Plane failed
  std::string export_url;  // https://<backend>/export, for the "bind a cluster" hint
};
// The consumer page: the user's clusters, each titled with its name (its ID when none is
// known), its last heartbeat, its namespaces, the APIs bound there and the claims of each API
// with their Ready state and message, in App Cluster namespaces (Control Plane names as
// secondary detail).
std::string ConsumerPage(const ConsumerView& view);

}  // namespace klutch::bind
