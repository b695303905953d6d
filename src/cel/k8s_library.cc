// The Kubernetes CEL libraries kube-apiserver offers to CRD validation rules (besides
// cel-go's strings extension, which the Env installs separately): lists and sets, regex,
// URLs, quantity, IP and CIDR.
#include "cel/cel.h"
#include "cel/library_util.h"

namespace klutch::cel {

void InstallKubernetesLibraries(FunctionRegistry& registry) {
  internal::InstallListsLibrary(registry);
  internal::InstallRegexLibrary(registry);
  internal::InstallURLLibrary(registry);
  internal::InstallQuantityLibrary(registry);
  internal::InstallIPLibrary(registry);
}

}  // namespace klutch::cel
