// The bindings step of kubectl bind (bind-protocol.md §3.4; upstream's servicebindings.go):
// the permission claims of every API decided before anything is bound, what would stop binding
// part way checked up front, the APIServiceBindings created in klutch-bind, and the wait for the
// konnector to report them Ready. Thread-compatible.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "client/rest_client.h"
#include "core/status.h"
#include "kubectl_bind/output.h"
#include "machinery/json.h"

namespace klutch::kubectl_bind {

using machinery::Json;

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

}  // namespace klutch::kubectl_bind
