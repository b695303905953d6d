#include "bind/web/web_html.h"

#include "core/strings.h"
#include "http/html.h"
#include "machinery/object.h"

namespace klutch::bind {
namespace {

constexpr std::string_view kStyle = R"css(
:root{color-scheme:light dark;--fg:#1d2330;--muted:#5b6475;--bg:#f5f7fa;--card:#fff;
--line:#dde2ea;--accent:#0b63ce;--ok:#1a7f37;--bad:#c62828;--warn:#9a6700}
@media (prefers-color-scheme:dark){:root{--fg:#e6e9ef;--muted:#a3acbb;--bg:#14171c;
--card:#1d2128;--line:#313845;--accent:#6aa8ff;--ok:#4ac26b;--bad:#ff7b72;--warn:#d29922}}
*{box-sizing:border-box}
body{margin:0;font:16px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;
color:var(--fg);background:var(--bg)}
header{background:var(--card);border-bottom:1px solid var(--line);padding:.75rem 1rem}
header strong{font-size:1.1rem}
main{max-width:60rem;margin:0 auto;padding:1rem}
h1{font-size:1.5rem;margin:.5rem 0 1rem}
h2{font-size:1.2rem;margin:0 0 .25rem}
h3{font-size:1rem;margin:1rem 0 .25rem}
.muted{color:var(--muted)}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(17rem,1fr));gap:1rem}
.card{background:var(--card);border:1px solid var(--line);border-radius:.5rem;padding:1rem;
overflow-wrap:anywhere}
.card form{margin-top:.75rem}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.15rem .75rem;margin:.5rem 0}
dt{color:var(--muted)}dd{margin:0}
ul{margin:.25rem 0;padding-left:1.25rem}
code{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:.9em}
button{font:inherit;background:var(--accent);color:#fff;border:0;border-radius:.375rem;
padding:.5rem 1rem;cursor:pointer;width:100%}
a.action{display:inline-block;background:var(--accent);color:#fff;border-radius:.375rem;
padding:.5rem 1rem;text-decoration:none}
nav.links{display:flex;flex-wrap:wrap;gap:.75rem;margin:1rem 0}
pre{background:var(--card);border:1px solid var(--line);border-radius:.375rem;padding:.75rem;
overflow-x:auto}
.sub{display:block;font-size:.8rem}
dd.plans{grid-column:1/-1;margin-bottom:.25rem}.plans code{font-size:.8em}
.plan{white-space:nowrap}
.pill{display:inline-block;border-radius:1rem;padding:0 .5rem;font-size:.85rem;
border:1px solid currentColor}
.True{color:var(--ok)}.False{color:var(--bad)}.Unknown,.none{color:var(--warn)}
.error{border-color:var(--bad)}
table{width:100%;border-collapse:collapse;font-size:.95rem}
th,td{text-align:left;padding:.35rem .5rem;border-top:1px solid var(--line);vertical-align:top}
@media (max-width:40rem){main{padding:.75rem}table,tbody,tr,td{display:block}
thead{display:none}tr{border-top:1px solid var(--line);padding:.25rem 0}
td{border:0;padding:.1rem 0}}
)css";

std::string Status(std::string_view ready) {
  std::string cls = ready.empty() ? "none" : std::string(ready);
  if (cls != "True" && cls != "False" && cls != "Unknown") cls = "none";
  std::string text = ready == "True"    ? "Ready"
                     : ready == "False" ? "Not ready"
                     : ready.empty()    ? "No status yet"
                                        : "Unknown";
  return "<span class=\"pill " + cls + "\">" + http::HtmlEscape(text) + "</span>";
}

std::string ClaimsList(const machinery::Json& claims) {
  if (!claims.is_array() || claims.empty()) return "<dd>none</dd>";
  std::string out = "<dd><ul>";
  for (const auto& c : claims) {
    std::string group = machinery::GetString(c, {"group"});
    std::string resource = machinery::GetString(c, {"resource"});
    std::string owner = machinery::GetString(c, {"selector", "owner"});
    const auto* required = c.is_object() ? machinery::Find(c, {"required"}) : nullptr;
    bool is_required = required != nullptr && required->is_boolean() && *required == true;
    out += "<li><code>" + http::HtmlEscape(group.empty() ? resource : resource + "." + group) +
           "</code>";
    if (!owner.empty()) out += " owned by the " + http::HtmlEscape(core::ToLower(owner));
    out += is_required ? " (required)" : " (optional)";
    out += "</li>";
  }
  return out + "</ul></dd>";
}

std::string List(const std::vector<std::string>& items) {
  if (items.empty()) return "none";
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ", ";
    out += "<code>" + http::HtmlEscape(items[i]) + "</code>";
  }
  return out;
}

// Plan names, each kept on one line with its comma.
std::string PlanList(const std::vector<std::string>& plans) {
  if (plans.empty()) return "none";
  std::string out;
  for (size_t i = 0; i < plans.size(); ++i) {
    out += "<span class=\"plan\"><code>" + http::HtmlEscape(plans[i]) + "</code>" +
           (i + 1 < plans.size() ? ",</span> " : "</span>");
  }
  return out;
}

// The plans, per Composition when the API ties them to Compositions (spec.compositionRef).
std::string Plans(const OfferedApi& api) {
  if (api.plans_by_composition.empty()) return PlanList(api.plans);
  std::string out;
  for (const auto& g : api.plans_by_composition) {
    out += "<div>" + PlanList(g.plans);
    if (!g.composition.empty()) {
      out += " <span class=\"muted\">with Composition <code>" + http::HtmlEscape(g.composition) +
             "</code></span>";
    }
    out += "</div>";
  }
  return out;
}

}  // namespace

std::string HtmlPage(std::string_view title, std::string_view body_html) {
  std::string out =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
      "<meta name=\"referrer\" content=\"no-referrer\"><title>";
  out += http::HtmlEscape(title);
  out += " - Klutch</title><style>";
  out += kStyle;
  out +=
      "</style></head><body><header><strong>Klutch</strong> <span class=\"muted\">data "
      "services for your cluster</span></header><main>";
  out += body_html;
  out += "</main></body></html>\n";
  return out;
}

namespace {
std::string ActionLink(const PageAction& a) {
  return "<a class=\"action\" href=\"" + http::HtmlEscape(a.href) + "\">" +
         http::HtmlEscape(a.label) + "</a>";
}
}  // namespace

std::string ErrorPage(std::string_view title, std::string_view what_happened,
                      std::string_view what_to_do, const PageAction* action) {
  std::string body = "<h1>" + http::HtmlEscape(title) + "</h1><div class=\"card error\"><p>" +
                     http::HtmlEscape(what_happened) + "</p><p><strong>What to do:</strong> " +
                     http::HtmlEscape(what_to_do) + "</p>";
  if (action != nullptr) body += "<p>" + ActionLink(*action) + "</p>";
  body += "</div>";
  return HtmlPage(title, body);
}

std::string LandingPage(const LandingView& view) {
  const std::string command = "kubectl bind " + view.export_url;
  std::string body = "<h1>" + http::HtmlEscape(view.pretty_name) +
                     " data services for your Kubernetes clusters</h1>"
                     "<p>This is the bind backend of a Klutch Control Plane. Bind your cluster "
                     "(an App Cluster) to it, then create claims such as a "
                     "<code>PostgresqlInstance</code> in your cluster with kubectl: the Control "
                     "Plane provisions the service and syncs its status and credentials back "
                     "into your cluster.</p>";
  body += "<nav class=\"links\">";
  if (view.user.empty()) {
    body += ActionLink({"/login?next=%2Fconsumer", "Log in"});
  }
  body += ActionLink({"/resources", "Catalog of services"}) +
          ActionLink({"/consumer", "Your clusters and claims"}) + "</nav>";
  if (!view.user.empty()) {
    body += "<p class=\"muted\">Logged in as " + http::HtmlEscape(view.user) + ".</p>";
  }
  body +=
      "<section class=\"card\"><h2>Bind a cluster</h2><p>With the <code>kubectl-bind</code> "
      "plugin on your PATH and your kubeconfig pointing at your cluster, run:</p><pre><code>" +
      http::HtmlEscape(command) +
      "</code></pre><p>A browser opens to log in; then choose the service to bind on the "
      "catalog page. kubectl bind installs the konnector and the service's API in your "
      "cluster.";
  if (view.device_grant) {
    body +=
        " Without a browser on that machine, add <code>--headless</code> and log in on "
        "another device with the code it prints.";
  }
  body += "</p></section>";
  return HtmlPage(view.pretty_name, body);
}

std::string CatalogPage(const CatalogView& view) {
  const bool read_only = view.sid.empty();
  std::string body;
  if (read_only) {
    body = "<h1>Services you can bind</h1><p class=\"muted\">Logged in as " +
           http::HtmlEscape(view.user) + ". To bind one to your cluster, run <code>kubectl bind " +
           http::HtmlEscape(view.export_url) +
           "</code> against it and choose it on the page that opens. <a "
           "href=\"/consumer\">Your clusters and claims</a></p>";
  } else {
    body = "<h1>Choose a service to bind</h1><p class=\"muted\">Logged in as " +
           http::HtmlEscape(view.user) + " for cluster <code>" + http::HtmlEscape(view.cluster_id) +
           "</code>. Binding an API installs it in your cluster through kubectl bind. "
           "<a href=\"/consumer?s=" +
           http::HtmlEscape(core::PercentEncode(view.sid)) + "\">Your clusters and claims</a></p>";
  }
  if (!view.destination.empty()) {
    body += "<p class=\"muted\">The credentials go to kubectl bind at <code>" +
            http::HtmlEscape(view.destination) + "</code> on your machine.</p>";
  }
  if (view.apis.empty()) {
    body +=
        "<div class=\"card\"><p>This Control Plane offers no APIs yet.</p><p><strong>What to "
        "do:</strong> ask the platform team to publish APIServiceExportTemplates, then run "
        "kubectl bind again.</p></div>";
    return HtmlPage("Catalog", body);
  }
  body += "<div class=\"grid\">";
  for (const auto& api : view.apis) {
    body += "<section class=\"card\" id=\"" + http::HtmlEscape(api.resource + "." + api.group) +
            "\"><h2>" + http::HtmlEscape(api.kind) + "</h2><div class=\"muted\"><code>" +
            http::HtmlEscape(api.resource + "." + api.group) + "</code></div>";
    if (!api.description.empty()) body += "<p>" + http::HtmlEscape(api.description) + "</p>";
    body += "<dl><dt>Scope</dt><dd>" + http::HtmlEscape(api.scope) + "</dd><dt>Versions</dt><dd>" +
            List(api.versions) + "</dd><dt>Plans</dt><dd class=\"plans\">" + Plans(api) +
            "</dd><dt>Needs access to</dt>" + ClaimsList(api.permission_claims) + "</dl>";
    if (read_only) {
      body += "</section>";
      continue;
    }
    body += "<form method=\"post\" action=\"/bind\"><input type=\"hidden\" name=\"s\" value=\"" +
            http::HtmlEscape(view.sid) + "\"><input type=\"hidden\" name=\"group\" value=\"" +
            http::HtmlEscape(api.group) + "\"><input type=\"hidden\" name=\"resource\" value=\"" +
            http::HtmlEscape(api.resource) + "\"><input type=\"hidden\" name=\"csrf\" value=\"" +
            http::HtmlEscape(view.csrf) + "\"><button type=\"submit\" class=\"bind " +
            http::HtmlEscape(api.resource) + "\">Bind " + http::HtmlEscape(api.kind) +
            "</button></form></section>";
  }
  body += "</div>";
  return HtmlPage("Catalog", body);
}

std::string ConsumerPage(const ConsumerView& view) {
  std::string body =
      "<h1>Your clusters</h1><p class=\"muted\">Logged in as " + http::HtmlEscape(view.user) + ".";
  if (!view.sid.empty()) {
    body += " <a href=\"/resources?s=" + http::HtmlEscape(core::PercentEncode(view.sid)) +
            "\">Back to the catalog</a>";
  } else {
    body += " <a href=\"/resources\">Catalog of services</a>";
  }
  body += "</p>";
  if (!view.error.empty()) {
    body += "<div class=\"card error\"><p>" + http::HtmlEscape(view.error) +
            "</p><p><strong>What to do:</strong> reload this page; if it keeps failing, tell "
            "the platform team.</p></div>";
  }
  if (view.clusters.empty() && view.error.empty()) {
    const std::string url = view.export_url.empty() ? "<this backend>/export" : view.export_url;
    body +=
        "<div class=\"card\"><p>You have not bound any cluster yet.</p><p><strong>What to "
        "do:</strong> run <code>kubectl bind " +
        http::HtmlEscape(url) + "</code> against your cluster.</p></div>";
  }
  for (const auto& c : view.clusters) {
    // Titled with the name the user gave the cluster; the cluster ID stays as detail.
    body += "<section class=\"card cluster\" style=\"margin-bottom:1rem\"><h2>" +
            (c.name.empty() ? "Cluster <code>" + http::HtmlEscape(c.cluster_id) + "</code>"
                            : http::HtmlEscape(c.name)) +
            " " + Status(c.ready) + "</h2><dl>";
    if (!c.name.empty()) {
      body += "<dt>Cluster ID</dt><dd><code>" + http::HtmlEscape(c.cluster_id) + "</code></dd>";
    }
    body += "<dt>Namespaces</dt><dd>";
    if (c.namespaces.empty()) body += "none yet";
    for (size_t i = 0; i < c.namespaces.size(); ++i) {
      if (i > 0) body += ", ";
      body += "<code>" + http::HtmlEscape(c.namespaces[i].app) + "</code>";
    }
    body += "</dd><dt>Last heartbeat</dt><dd>" +
            (c.last_heartbeat.empty()
                 ? std::string("never (the konnector has not connected yet)")
                 : http::HtmlEscape(c.last_heartbeat) +
                       (c.heartbeat_age.empty() ? ""
                                                : " (" + http::HtmlEscape(c.heartbeat_age) + ")")) +
            "</dd>";
    if (!c.konnector_version.empty()) {
      body += "<dt>Konnector</dt><dd>" + http::HtmlEscape(c.konnector_version) + "</dd>";
    }
    if (!c.ready_message.empty()) {
      body += "<dt>Status</dt><dd>" + http::HtmlEscape(c.ready_message) + "</dd>";
    }
    body += "<dt>On the Control Plane</dt><dd class=\"muted\">namespace <code>" +
            http::HtmlEscape(c.cluster_namespace) + "</code>";
    for (const auto& n : c.namespaces) {
      body += "<span class=\"sub\"><code>" + http::HtmlEscape(n.app) + "</code> in <code>" +
              http::HtmlEscape(n.provider) + "</code></span>";
    }
    body += "</dd></dl>";
    if (c.exports.empty()) body += "<p class=\"muted\">No APIs bound yet.</p>";
    for (const auto& e : c.exports) {
      body += "<h3><code>" + http::HtmlEscape(e.name) + "</code> " + Status(e.ready) + "</h3>";
      if (!e.message.empty()) body += "<p class=\"muted\">" + http::HtmlEscape(e.message) + "</p>";
      if (e.claims.empty()) {
        body += "<p class=\"muted\">No claims yet.</p>";
        continue;
      }
      body +=
          "<table><thead><tr><th>Namespace</th><th>Name</th><th>Ready</th><th>Message</th>"
          "</tr></thead><tbody>";
      for (const auto& claim : e.claims) {
        const std::string& shown = claim.ns.empty() ? claim.provider_ns : claim.ns;
        body += "<tr><td><code>" + http::HtmlEscape(shown) + "</code>";
        if (!claim.ns.empty() && !claim.provider_ns.empty() && claim.provider_ns != claim.ns) {
          body += "<span class=\"sub muted\">Control Plane: <code>" +
                  http::HtmlEscape(claim.provider_ns) + "</code></span>";
        }
        body += "</td><td><code>" + http::HtmlEscape(claim.name) + "</code></td><td>" +
                Status(claim.ready) +
                (claim.reason.empty() ? "" : " " + http::HtmlEscape(claim.reason)) + "</td><td>" +
                http::HtmlEscape(claim.message) + "</td></tr>";
      }
      body += "</tbody></table>";
    }
    body += "</section>";
  }
  return HtmlPage("Your clusters", body);
}

}  // namespace klutch::bind
