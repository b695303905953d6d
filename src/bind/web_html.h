// The bind backend's pages: the catalog of offered APIs (/resources), the consumer page
// (/consumer) and error pages. Plain server-rendered HTML with one embedded stylesheet, no
// JavaScript, readable on a phone (viewport meta, one-column layout on narrow screens). Every
// piece of text that comes from users, clusters or the identity provider goes through
// HtmlEscape.
//
// Pure functions of their views; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "bind/catalog.h"

namespace klutch::bind {

// `text` with & < > " ' written as character references (safe in element content and in
// quoted attribute values).
std::string HtmlEscape(std::string_view text);

// A whole HTML document: `title` (escaped) and `body_html` (trusted markup) in the layout.
std::string HtmlPage(std::string_view title, std::string_view body_html);

// An error page: what went wrong and what to do about it (both plain text, escaped).
std::string ErrorPage(std::string_view title, std::string_view what_happened,
                      std::string_view what_to_do);

struct CatalogView {
  std::string sid;   // the CLI session, posted back with the choice
  std::string csrf;  // the session's CSRF token, posted back with the choice
  std::string user;  // who is logged in (email or subject)
  std::string cluster_id;
  // Where the credentials go (host:port of the kubectl bind callback), shown to the user.
  std::string destination;
  std::vector<OfferedApi> apis;
};
// The catalog: per API a card with kind, group, resource, scope, description, versions, plans
// and the permission claims it needs, and a form that POSTs s, group, resource and csrf to
// /bind; its button has the CSS classes "bind" and the resource's plural (e2e tests click
// `button.<plural>`).
std::string CatalogPage(const CatalogView& view);

struct ClaimView {
  std::string kind, ns, name;
  std::string ready;  // "True", "False", "Unknown" or "" (no Ready condition yet)
  std::string reason, message;
};
struct ExportView {
  std::string name;   // "<resource>.<group>"
  std::string ready;  // the APIServiceExport's Connected and Established, the worse of them
  std::string message;
  std::vector<ClaimView> claims;
};
struct ClusterView {
  std::string cluster_namespace;
  std::string cluster_id;
  std::string last_heartbeat;  // RFC 3339, "" = never
  std::string heartbeat_age;   // "42s ago", "" = never
  std::string ready, ready_message;
  std::string konnector_version;
  std::vector<std::string> provider_namespaces;  // "<consumer ns> -> <provider ns>"
  std::vector<ExportView> exports;
};
struct ConsumerView {
  std::string user;
  std::string sid;  // for the link back to the catalog; "" = none
  std::vector<ClusterView> clusters;
  std::string error;  // shown above the list when reading the Control Plane failed
};
// The consumer page: the user's clusters, each with its last heartbeat, the APIs bound there
// and the claims of each API on the Control Plane with their Ready state and message.
std::string ConsumerPage(const ConsumerView& view);

}  // namespace klutch::bind
