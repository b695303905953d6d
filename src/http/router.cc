#include "http/router.h"

#include <fmt/format.h>

#include <set>

#include "core/strings.h"

namespace klutch::http {

std::string_view PathParams::Get(std::string_view name) const {
  for (const auto& [k, v] : values_) {
    if (k == name) return v;
  }
  return {};
}

bool PathParams::Has(std::string_view name) const {
  for (const auto& [k, v] : values_) {
    if (k == name) return true;
  }
  return false;
}

std::optional<int64_t> PathParams::Int(std::string_view name) const {
  if (!Has(name)) return std::nullopt;
  return core::ParseInt64(Get(name));
}

namespace {

enum class SegmentKind { kLiteral, kInt, kParam, kRest };

struct Segment {
  SegmentKind kind = SegmentKind::kLiteral;
  std::string text;  // the literal, or the parameter's name
};

core::Result<std::vector<Segment>> ParsePattern(std::string_view pattern) {
  auto bad = [&](std::string_view why) {
    return core::Invalid(fmt::format("route pattern \"{}\": {}", pattern, why));
  };
  if (!pattern.starts_with('/')) return bad("must start with '/'");
  std::vector<Segment> out;
  std::set<std::string> names;
  for (std::string_view part : core::SplitNonEmpty(pattern, '/')) {
    if (!out.empty() && out.back().kind == SegmentKind::kRest) {
      return bad("{name...} must be the last segment");
    }
    Segment seg;
    if (part.starts_with('{')) {
      if (!part.ends_with('}')) return bad("unclosed '{'");
      std::string_view inner = part.substr(1, part.size() - 2);
      seg.kind = SegmentKind::kParam;
      if (inner.ends_with("...")) {
        seg.kind = SegmentKind::kRest;
        inner.remove_suffix(3);
      } else if (auto colon = inner.find(':'); colon != std::string_view::npos) {
        std::string_view type = inner.substr(colon + 1);
        if (type != "int") return bad(fmt::format("unknown parameter type \"{}\"", type));
        seg.kind = SegmentKind::kInt;
        inner = inner.substr(0, colon);
      }
      if (inner.empty() || inner.find_first_of("{}:/") != std::string_view::npos) {
        return bad("bad parameter name");
      }
      seg.text = std::string(inner);
      if (!names.insert(seg.text).second) return bad("parameter \"" + seg.text + "\" used twice");
    } else {
      if (part.find_first_of("{}") != std::string_view::npos) return bad("stray brace");
      seg.text = std::string(part);
    }
    out.push_back(std::move(seg));
  }
  return out;
}

bool IsInt(std::string_view s) { return core::ParseInt64(s).has_value(); }

// The request's path segments, each percent-decoded on its own, so an encoded '/' stays
// inside its segment.
std::vector<std::string> Segments(const Request& request) {
  std::vector<std::string> out;
  if (request.target.empty()) {
    for (auto part : core::SplitNonEmpty(request.path, '/')) out.emplace_back(part);
    return out;
  }
  std::string_view raw = request.target;
  raw = raw.substr(0, raw.find('?'));
  for (auto part : core::SplitNonEmpty(raw, '/')) {
    auto decoded = core::PercentDecode(part, false);
    out.push_back(decoded ? *decoded : std::string(part));
  }
  return out;
}

}  // namespace

struct Router::Node {
  struct Route {
    std::vector<std::string> names;  // parameter names, in the order they are captured
    RouteHandler handler;
  };
  std::map<std::string, std::unique_ptr<Node>, std::less<>> literals;
  std::unique_ptr<Node> int_param, param, rest;
  std::map<std::string, Route> routes;  // by method, for patterns ending here

  // Terminal nodes matching segments[i..] in priority order, with the captured values.
  void Match(const std::vector<std::string>& segments, size_t i, std::vector<std::string>& captured,
             const std::function<bool(const Node&, const std::vector<std::string>&)>& visit,
             bool& stop) const {
    if (stop) return;
    if (i == segments.size()) {
      if (!routes.empty() && visit(*this, captured)) stop = true;
      if (stop) return;
    } else {
      if (auto it = literals.find(std::string_view(segments[i])); it != literals.end()) {
        it->second->Match(segments, i + 1, captured, visit, stop);
      }
      if (int_param && IsInt(segments[i])) {
        captured.emplace_back(segments[i]);
        int_param->Match(segments, i + 1, captured, visit, stop);
        captured.pop_back();
      }
      if (param) {
        captured.emplace_back(segments[i]);
        param->Match(segments, i + 1, captured, visit, stop);
        captured.pop_back();
      }
    }
    if (rest && !stop) {
      std::string joined;
      for (size_t k = i; k < segments.size(); ++k) {
        if (k > i) joined += '/';
        joined += segments[k];
      }
      captured.push_back(std::move(joined));
      if (!rest->routes.empty() && visit(*rest, captured)) stop = true;
      captured.pop_back();
    }
  }
};

Router::Router(ErrorResponder errors)
    : errors_(std::move(errors)), root_(std::make_unique<Node>()) {}
Router::~Router() = default;
Router::Router(Router&&) noexcept = default;
Router& Router::operator=(Router&&) noexcept = default;

core::Status Router::Add(std::string_view method, std::string_view pattern, RouteHandler handler) {
  KLUTCH_ASSIGN_OR_RETURN(std::vector<Segment> segments, ParsePattern(pattern));
  Node* node = root_.get();
  std::vector<std::string> names;
  for (const Segment& seg : segments) {
    std::unique_ptr<Node>* next = nullptr;
    switch (seg.kind) {
      case SegmentKind::kLiteral:
        next = &node->literals[seg.text];
        break;
      case SegmentKind::kInt:
        next = &node->int_param;
        break;
      case SegmentKind::kParam:
        next = &node->param;
        break;
      case SegmentKind::kRest:
        next = &node->rest;
        break;
    }
    if (seg.kind != SegmentKind::kLiteral) names.push_back(seg.text);
    if (!*next) *next = std::make_unique<Node>();
    node = next->get();
  }
  auto [it, added] = node->routes.emplace(std::string(method), Node::Route{names, handler});
  if (!added) {
    return core::Invalid(fmt::format("route {} {}: already routed", method, pattern));
  }
  return core::Status::Ok();
}

Router& Router::MustAdd(std::string_view method, std::string_view pattern, RouteHandler handler) {
  core::Status st = Add(method, pattern, std::move(handler));
  if (!st.ok()) core::CheckFailed(st.message().c_str(), __FILE__, __LINE__);
  return *this;
}

Router& Router::Get(std::string_view pattern, RouteHandler handler) {
  return MustAdd("GET", pattern, std::move(handler));
}
Router& Router::Post(std::string_view pattern, RouteHandler handler) {
  return MustAdd("POST", pattern, std::move(handler));
}
Router& Router::Put(std::string_view pattern, RouteHandler handler) {
  return MustAdd("PUT", pattern, std::move(handler));
}
Router& Router::Patch(std::string_view pattern, RouteHandler handler) {
  return MustAdd("PATCH", pattern, std::move(handler));
}
Router& Router::Delete(std::string_view pattern, RouteHandler handler) {
  return MustAdd("DELETE", pattern, std::move(handler));
}

Response Router::Serve(Request& request) const {
  const std::vector<std::string> segments = Segments(request);
  std::vector<std::string> captured;
  const Node::Route* route = nullptr;
  PathParams params;
  std::set<std::string> allowed;
  bool stop = false;
  root_->Match(
      segments, 0, captured,
      [&](const Node& node, const std::vector<std::string>& values) {
        auto it = node.routes.find(request.method);
        if (it == node.routes.end() && request.method == "HEAD") it = node.routes.find("GET");
        if (it == node.routes.end()) {
          for (const auto& [m, r] : node.routes) {
            allowed.insert(m);
            if (m == "GET") allowed.insert("HEAD");
          }
          return false;
        }
        route = &it->second;
        for (size_t k = 0; k < route->names.size() && k < values.size(); ++k) {
          params.Set(route->names[k], values[k]);
        }
        return true;
      },
      stop);
  if (route) return route->handler(request, params);
  auto error = [&](int code, std::string message) {
    if (errors_) return errors_(code, std::move(message));
    Response r;
    r.status = code;
    r.headers.Set("Content-Type", "text/plain; charset=utf-8");
    r.body = std::move(message);
    return r;
  };
  if (allowed.empty()) return error(404, "not found");
  Response r = error(405, "method not allowed");
  r.headers.Set("Allow",
                core::Join(std::vector<std::string>(allowed.begin(), allowed.end()), ", "));
  return r;
}

bool Router::Matches(std::string_view path) const {
  std::vector<std::string> segments;
  for (auto part : core::SplitNonEmpty(path, '/')) segments.emplace_back(part);
  std::vector<std::string> captured;
  bool stop = false;
  root_->Match(
      segments, 0, captured, [](const Node&, const std::vector<std::string>&) { return true; },
      stop);
  return stop;
}

Handler Router::AsHandler() const {
  return [this](Request& request) { return Serve(request); };
}

}  // namespace klutch::http
