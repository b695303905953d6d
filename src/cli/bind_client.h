// The consumer side of `kubectl bind` (bind-protocol.md §3), as steps a command strings
// together and tests call one by one: reading the backend's BindingProvider, decoding the
// BindingResponse the browser delivers, keeping the provider kubeconfig in a Secret of the App
// Cluster, creating an APIServiceExportRequest on the provider and waiting for it, installing
// the konnector and granting it the bound resources, and creating the APIServiceBindings.
//
// Each step talks through a client::RestClient (App Cluster or provider) and returns
// core::Status errors whose message says what went wrong and what to do next. Progress goes
// to the `BindOutput` the caller passes. Functions are thread-compatible (one command at a
// time).
#pragma once

#include <chrono>
#include <functional>
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "client/rest_client.h"
#include "core/status.h"
#include "machinery/json.h"

namespace klutch::cli::bind {

using machinery::Json;

inline constexpr char kBindNamespace[] = "klutch-bind";
inline constexpr char kBindApiVersion[] = "klutch.anynines.com/v1alpha1";
// The version this CLI reports and installs the konnector at.
inline constexpr char kCliVersion[] = "v0.1.0";
// The konnector's bound-resources role, which the CLI extends per bound API.
inline constexpr char kBoundResourcesRole[] = "klutch-bind-konnector-bound-resources";

// Where progress lines go (stderr in the command) and how questions are asked.
struct BindOutput {
  std::ostream* err = nullptr;  // progress and warnings; nullptr = silent
  // Reads one answer line for a prompt; nullopt at end of input.
  std::function<std::optional<std::string>(const std::string& prompt)> ask;
};

// The BindingProvider of §1.8 as the CLI uses it.
struct BindingProvider {
  std::string pretty_name;
  std::string version;
  std::string authenticated_url;  // OAuth2CodeGrant.authenticatedURL
  // Our device-grant method (docs/decisions/0013-bind-backend.md), when offered.
  std::string device_authorization_url;
  std::string device_token_url;
  std::string device_bind_url;  // binds more APIs with one login's DeviceSession ("" = none)
};

// Parses and checks a BindingProvider document: kind BindingProvider, apiVersion exactly
// "v1alpha1", a version this CLI can talk to (v0.0.0 development builds or >= v0.3.0), an
// OAuth2CodeGrant method. Errors name the URL it came from.
core::Result<BindingProvider> ParseBindingProvider(std::string_view body, const std::string& url);

// The BindingResponse of §1.9, checked: kind, apiVersion, oauth2CodeGrant.sid == `session_id`,
// a kubeconfig, at least one request, each an APIServiceExportRequest of kBindApiVersion.
struct BindingResponse {
  std::string id;  // "<issuer>/<subject>", informational
  // authentication.oauth2CodeGrant.displayName, optional: the name a person knows the user
  // by (the ID token's preferred_username, else email, else name).
  std::string display_name;
  std::string kubeconfig;  // the provider kubeconfig (YAML)
  std::vector<Json> requests;
};
core::Result<BindingResponse> ParseBindingResponse(std::string_view json,
                                                   const std::string& session_id);
// Whom the login was for, as `kubectl bind` prints it: the display name, else the subject part
// of the id ("" when the response has neither).
std::string DisplayName(const BindingResponse& response);

// The `response` query parameter of the CLI callback: base64 in the URL or the standard
// alphabet, padded or not, of a BindingResponse.
core::Result<BindingResponse> DecodeCallbackResponse(std::string_view response,
                                                     const std::string& session_id);

// The authorize URL the user opens: `authenticated_url` with c=<cid>, n=<cluster_name> (when
// not empty), s=<sid> and u=http://127.0.0.1:<port>/callback (keys sorted, existing parameters
// kept). Upstream's CLI sends p=<port>, which backends turn into
// http://localhost:<port>/callback; the explicit IPv4 loopback keeps the credentials off any
// listener on [::1].
core::Result<std::string> AuthorizeUrl(const std::string& authenticated_url, int port,
                                       const std::string& session_id, const std::string& cluster_id,
                                       const std::string& cluster_name = "");

// The form that starts a device login at the backend's deviceAuthorizationURL: s=<sid>,
// c=<cid> and n=<cluster_name> when not empty.
std::vector<std::pair<std::string, std::string>> DeviceAuthorizeForm(
    const std::string& session_id, const std::string& cluster_id, const std::string& cluster_name);

// The App Cluster's name as its user knows it, sent to the backend as `n` (/authorize and
// /device/authorize), which titles the cluster with it on its /consumer page. `flag` is
// --cluster-name when given: trimmed, "" = send no name, kBadRequest naming --cluster-name when
// longer than 253 bytes or holding control characters (the backend's limits). Without the
// flag, `context_name` (the kubeconfig context in use, what `kubectl config current-context`
// prints) when it fits those limits, else "" (no name sent: the backend shows the cluster ID).
core::Result<std::string> ClusterNameToSend(const std::optional<std::string>& flag,
                                            const std::string& context_name);

// Namespace klutch-bind in the App Cluster (created when missing); returns its UID, from which
// the cluster ID is derived (bind::ClusterIdFromNamespaceUid).
core::Result<std::string> EnsureBindNamespace(client::RestClient& app);

// The provider kubeconfig's server and the namespace of its current context (the consumer's
// cluster namespace); kBadRequest when either is missing.
struct ProviderTarget {
  std::string server;
  std::string cluster_namespace;
};
core::Result<ProviderTarget> ReadProviderKubeconfig(const std::string& kubeconfig);

// Stores `kubeconfig` in a Secret of klutch-bind: the existing one whose kubeconfig points at
// the same server and namespace is updated, otherwise a new one (generateName kubeconfig-)
// is created. Returns the Secret's name. With `dry_run`, nothing is written and the name is
// that of the Secret that would be updated ("" for a new one).
core::Result<std::string> StoreProviderKubeconfig(client::RestClient& app,
                                                  const std::string& kubeconfig, bool dry_run,
                                                  const BindOutput& out);

// Reads an APIServiceExportRequest manifest (YAML or JSON) and checks apiVersion, kind and
// that it names at least one resource.
core::Result<Json> ParseExportRequest(std::string_view text, const std::string& source);

// Creates `request` in `cluster_namespace` on the provider (generateName export- when it has
// no name; on AlreadyExists with a name, once more with generateName <name>-) and waits, by
// watching it, until its phase is Succeeded (returns it as stored) or Failed (kInvalid with the
// terminalMessage), it is deleted, or `timeout` passes (kTimeout).
core::Result<Json> CreateExportRequest(client::RestClient& provider,
                                       const std::string& cluster_namespace, Json request,
                                       std::chrono::milliseconds timeout, const BindOutput& out);

// The default konnector image at `version` ("v1.2.3", as --konnector-version takes it);
// kBadRequest when it is not a semantic version with a leading v.
core::Result<std::string> KonnectorImageAt(std::string_view version);

struct KonnectorInstall {
  std::string image;   // "" = the default image at this CLI's version
  bool force = false;  // apply even when a konnector is installed (--konnector-image given)
  bool dry_run = false;
  std::vector<Json>* printed = nullptr;  // dry run: the objects that would be applied
};
// Installs the konnector from the embedded deploy/konnector manifests, create-or-update in
// file order (objects annotated bootstrap.klutch.anynines.com/create-only are never updated).
// Without `force`, an installed konnector is left alone unless its image is ours and older
// than this CLI (then upgraded); a newer one only draws a warning.
core::Status InstallKonnector(client::RestClient& app, const KonnectorInstall& options,
                              const BindOutput& out);

// OK when kubectl bind may grant the konnector `resource`.`group` and the resources of
// `claims`; otherwise the kForbidden GrantBoundResource answers (nothing is read or written).
core::Status CheckGrantable(const std::string& group, const std::string& resource,
                            const Json& claims);

// Adds rules for `resource`.`group` and its status subresource (and for each claimed resource
// of `claims` outside core Secrets/ConfigMaps) to ClusterRole kBoundResourcesRole, unless a
// rule already covers them; creates the role and its binding when missing. Never removes
// rules. kForbidden (nothing written) for wildcards, subresources, core resources other than
// Secrets and ConfigMaps, and the built-in Kubernetes groups (RBAC, workloads, admission, ...):
// a provider does not get to hand the konnector rights over the cluster itself.
core::Status GrantBoundResource(client::RestClient& app, const std::string& group,
                                const std::string& resource, const Json& claims, bool dry_run,
                                const BindOutput& out);

// Waits until the APIServiceBinding CRD is served in the App Cluster (the konnector installs
// it at start), printing a dot a second; kTimeout with what to check after `timeout`.
core::Status WaitForBindingCrd(client::RestClient& app, std::chrono::milliseconds timeout,
                               const BindOutput& out);

// One permission claim a new APIServiceBinding asks the user to accept.
struct ClaimQuestion {
  std::string binding;          // the APIServiceBinding's name, "<resource>.<group>"
  std::string group, resource;  // what the claim is on ("" group: the core API)
  std::string owner;            // selector.owner: "Provider" or "Consumer"
  bool required = false;
  // The question as a sentence ("The provider wants to create and update secrets objects it
  // provides in your cluster (required for the API to work)").
  std::string Text() const;
};

// The user's answers to ClaimQuestions, decided before anything is bound.
struct ClaimAnswers {
  bool accept_all = false;            // --accept-permission-claims
  std::map<std::string, bool> given;  // Key(...) -> accepted
  static std::string Key(const std::string& binding, const std::string& group,
                         const std::string& resource);
  // The answer to that claim: accept_all, else the one given, else nullopt.
  std::optional<bool> Find(const std::string& binding, const std::string& group,
                           const std::string& resource) const;
};

// The questions binding `apis` raises: one per permission claim of each API that has no
// APIServiceBinding yet (an existing binding's claims were answered when it was made). Each
// entry of `apis` is {group, resource, permissionClaims}: an APIServiceExportRequest's
// spec.resources item or a DeviceSession's offered API. Reads the bindings in the App Cluster
// (none when their CRD is not installed yet); writes nothing.
core::Result<std::vector<ClaimQuestion>> ClaimQuestions(client::RestClient& app,
                                                        const std::vector<Json>& apis);
// The spec.resources items of `requests` (APIServiceExportRequests), for ClaimQuestions.
std::vector<Json> RequestedApis(const std::vector<Json>& requests);

// Decides every question at once, before kubectl bind writes anything: all accepted with
// `accept_all`; otherwise each asked through out.ask in turn (an answer other than y/yes/n/no
// asks again). When there is no one to ask (out.ask answers nullopt), kBadRequest listing
// every question and the flag that answers them, so that a run without a terminal fails
// before binding any API rather than half way.
core::Result<ClaimAnswers> DecideClaims(const std::vector<ClaimQuestion>& questions,
                                        bool accept_all, const BindOutput& out);

// What would stop binding `apis` ({group, resource, permissionClaims} each) part way, checked
// before anything is written, all in one error that says nothing was bound: an API the
// konnector may not be granted (kForbidden, see CheckGrantable), or one already bound through
// another Secret than `secret_name` (the provider kubeconfig's Secret StoreProviderKubeconfig
// would reuse, "" for a new one): another provider (kAlreadyExists). Reads only.
core::Status CheckBindable(client::RestClient& app, const std::vector<Json>& apis,
                           const std::string& secret_name);

// For each resource of the (server-returned) export request: the APIServiceBinding
// `<resource>.<group>` in klutch-bind referring to Secret `secret_name`. An existing binding
// must use the same Secret (else kAlreadyExists: another provider) and its CRD, when present,
// must be owned by it. A new one takes each permission claim's state from `answers` (a claim
// they do not answer is asked through out.ask; kBadRequest when no one can answer) and is
// created with status Ready=False/Pending, saying that it waits for the konnector. Returns the
// bindings' names.
core::Result<std::vector<std::string>> CreateBindings(
    client::RestClient& app, const Json& export_request, const std::string& secret_name,
    const ClaimAnswers& answers, bool dry_run, std::vector<Json>* printed, const BindOutput& out);

// Waits until the konnector has reported each binding of `names` Ready with its provider's
// name (status.providerPrettyName, the table's PROVIDER column), polled with a dot a second on
// out.err, or until `timeout` passes (zero: looks once). Returns, for each binding not there
// yet, a line saying what it waits for and how to follow it: the konnector has not picked it
// up (its Ready is still the CLI's own Pending), the konnector's Ready message, or the
// provider's name still missing.
core::Result<std::vector<std::string>> WaitForBindingsReady(client::RestClient& app,
                                                            const std::vector<std::string>& names,
                                                            std::chrono::milliseconds timeout,
                                                            const BindOutput& out);

// The bindings as a table (the server's Table rendering, columns of priority 0), as kubectl
// get prints it.
core::Result<std::string> BindingsTable(client::RestClient& app,
                                        const std::vector<std::string>& names);

}  // namespace klutch::cli::bind
