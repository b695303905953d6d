// What kubectl bind does once it holds a provider kubeconfig and export requests (after either
// login, or from `kubectl bind apiservice`), step by step in the order it runs them: decide
// every permission claim and check that every API can be bound before anything is written,
// then store the kubeconfig, create the export requests, install the konnector, create the
// bindings, grant the konnector what was accepted, and show the result. Thread-compatible.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "client/rest_client.h"
#include "core/status.h"
#include "kubectl_bind/bindings.h"
#include "kubectl_bind/output.h"
#include "machinery/json.h"

namespace klutch::kubectl_bind {

// The options of a run (the command's flags, parsed).
struct BindOptions {
  bool dry_run = false;
  std::string output = "yaml";  // how a dry run prints the objects: json or yaml
  bool skip_konnector = false;
  std::string konnector_image;    // "" = the default image (installed only when missing)
  std::string konnector_version;  // "" = this CLI's; else the default image at it
  bool accept_claims = false;
  std::chrono::milliseconds timeout = std::chrono::minutes(10);
  std::chrono::milliseconds ready_timeout{};
};

// Where the APIs come from: the provider kubeconfig, the Secret of klutch-bind already holding
// it ("" = StoreProviderKubeconfig finds or makes one) and the consumer's namespace on the
// provider ("" = the kubeconfig context's).
struct ProviderAccess {
  std::string kubeconfig;
  std::string secret_hint;
  std::string remote_namespace;
};

// Decides the permission claims of `requests` that `answers` leaves open, adding the answers;
// called for all the APIs of a run before the first is bound.
core::Status DecideRemainingClaims(client::RestClient& app, const std::vector<Json>& requests,
                                   bool accept_claims, ClaimAnswers& answers,
                                   const BindOutput& out);

// Checks, before anything is written, that every API of `requests` can be bound with
// `provider` (its Secret secret_hint, or the one StoreProviderKubeconfig would reuse): see
// CheckBindable.
core::Status CheckBindableFrom(client::RestClient& app, const ProviderAccess& provider,
                               const std::vector<Json>& requests);

// The steps after the claims are decided: the provider kubeconfig stored, each export request
// created on the provider and accepted, the konnector installed and ready, the bindings
// created with `answers`, and only then the konnector granted the bound resources and the
// accepted claims. A dry run writes nothing and prints the objects on stdout. The bindings'
// names are appended to `bound`.
core::Status BindRequests(client::RestClient& app, const ProviderAccess& provider,
                          std::vector<Json> requests, const ClaimAnswers& answers,
                          const BindOptions& options, const BindOutput& out,
                          std::vector<std::string>& bound);

// The table of the bindings a run made (stdout), once the konnector reported them (up to
// options.ready_timeout; right after binding the table would only show the CLI's own Pending),
// and for each binding not Ready yet, what it waits for (stderr). Nothing in a dry run.
void ShowBindings(client::RestClient& app, const std::vector<std::string>& names,
                  const BindOptions& options, const BindOutput& out);

}  // namespace klutch::kubectl_bind
