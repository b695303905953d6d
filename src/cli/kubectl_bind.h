// `kubectl-bind`, the kubectl plugin of the binding protocol (bind-protocol.md §3): kubectl
// runs it for `kubectl bind ...` when it is on PATH.
//
//   kubectl bind <backend export URL>    log in (browser, or --headless device grant), pick the
//                                        APIs, store the provider kubeconfig, install the
//                                        konnector, create the APIServiceBindings
//   kubectl bind apiservice -f FILE|URL  the same from an APIServiceExportRequest and a
//                                        provider kubeconfig (what platform operators script)
#pragma once

namespace klutch::cli {

// Entry point of the kubectl-bind binary; returns the process exit code.
int KubectlBindMain(int argc, char** argv);

}  // namespace klutch::cli
