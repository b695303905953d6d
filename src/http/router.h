// Router: method + path pattern -> handler, the routing table of every HTTP server in the
// project (API server non-resource paths, health and metrics endpoints, the bind backend, the
// broker).
//
// A pattern is a path of segments, each a literal ("v2"), a parameter ("{instance_id}"), a
// typed parameter ("{port:int}": a base-10 integer, the route does not match otherwise), or,
// last only, the rest of the path ("{path...}": zero or more segments joined by '/'). Paths
// are matched segment by segment on the percent-decoded path, ignoring empty segments (so
// "/healthz/" is "/healthz"). Where several patterns match, the more specific one wins at the
// first segment where they differ: literal, then typed, then plain parameter, then rest.
//
// Serve answers a path no pattern matches with 404, and a path that matches only patterns of
// other methods with 405 and an Allow header, through the ErrorResponder (so each server
// formats errors its own way). A route for GET also answers HEAD.
//
// Routes are added before serving; after that Serve is thread-safe (const).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "http/message.h"

namespace klutch::http {

// The parameters a matched pattern captured (copies of the decoded path segments).
class PathParams {
 public:
  // The value of `name`, "" when the pattern has no such parameter.
  std::string_view Get(std::string_view name) const;
  // The value of an {name:int} parameter (or any parameter that is a base-10 int64).
  std::optional<int64_t> Int(std::string_view name) const;
  bool Has(std::string_view name) const;

  void Set(std::string name, std::string value) {
    values_.emplace_back(std::move(name), std::move(value));
  }

 private:
  std::vector<std::pair<std::string, std::string>> values_;
};

using RouteHandler = std::function<Response(Request& request, const PathParams& params)>;
// Formats the router's own 404/405 answers.
using ErrorResponder = std::function<Response(int code, std::string message)>;

class Router {
 public:
  // `errors` unset: plain-text answers.
  explicit Router(ErrorResponder errors = {});
  ~Router();
  Router(Router&&) noexcept;
  Router& operator=(Router&&) noexcept;

  // Adds a route. kInvalid naming the pattern when it is malformed (unclosed brace, unknown
  // type, "{x...}" not last, a parameter name used twice) or when the same method and pattern
  // shape are already routed.
  core::Status Add(std::string_view method, std::string_view pattern, RouteHandler handler);
  // Add() for patterns fixed in code, where a malformed pattern is a programmer error
  // (KLUTCH_CHECK). Return *this for chaining.
  Router& Get(std::string_view pattern, RouteHandler handler);
  Router& Post(std::string_view pattern, RouteHandler handler);
  Router& Put(std::string_view pattern, RouteHandler handler);
  Router& Patch(std::string_view pattern, RouteHandler handler);
  Router& Delete(std::string_view pattern, RouteHandler handler);

  // Routes `request` to its handler, or answers 404/405.
  Response Serve(Request& request) const;
  // Whether some route (of any method) matches `path`, taken as already percent-decoded (as
  // Serve takes Request::path when the request has no raw target): an encoded '/' cannot be
  // told apart from a separator here.
  bool Matches(std::string_view path) const;
  // Serve as an http::Handler; the router must outlive it.
  Handler AsHandler() const;

 private:
  struct Node;
  Router& MustAdd(std::string_view method, std::string_view pattern, RouteHandler handler);

  ErrorResponder errors_;
  std::unique_ptr<Node> root_;
};

}  // namespace klutch::http
