// Reviews and tokens: the create-only kinds of authentication.k8s.io and
// authorization.k8s.io (TokenReview, SelfSubjectReview, SubjectAccessReview,
// SelfSubjectAccessReview, LocalSubjectAccessReview, SelfSubjectRulesReview) and the
// serviceaccounts/token subresource (TokenRequest). Each takes the decoded request body and
// returns the object kube-apiserver answers with (201), or a Status: 400 for a body of the
// wrong kind, 422 naming the field for invalid specs, 404 for a missing ServiceAccount.
// Thread-safe.
#pragma once

#include <string_view>

#include "apiserver/access.h"
#include "apiserver/resource.h"
#include "apiserver/rest_storage.h"

namespace klutch::apiserver {

core::Result<Json> CreateReview(const ResourceInfo& r, std::string_view ns, Json body,
                                const Caller& caller, AccessControl& access);

core::Result<Json> CreateServiceAccountToken(RestStorage& storage, AccessControl& access,
                                             std::string_view ns, std::string_view name, Json body);

}  // namespace klutch::apiserver
