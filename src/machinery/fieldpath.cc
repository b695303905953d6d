#include "machinery/fieldpath.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/strings.h"
#include "fmt/format.h"

namespace klutch::machinery {

namespace {

constexpr int kMaxFieldsDepth = 128;
constexpr int kMaxElementDepth = 32;

int TypeRank(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null:
      return 0;
    case Json::value_t::boolean:
      return 1;
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float:
      return 2;
    case Json::value_t::string:
      return 3;
    case Json::value_t::array:
      return 4;
    case Json::value_t::object:
      return 5;
    default:
      return 6;  // binary / discarded never occur in parsed JSON
  }
}

int CompareNumbers(const Json& a, const Json& b) {
  // Compare exactly within one representation; mixed int/float compares as double, which is
  // what Kubernetes' value.Compare does too.
  if (a.is_number_integer() && b.is_number_integer()) {
    if (a.is_number_unsigned() || b.is_number_unsigned()) {
      // One may be above INT64_MAX; an unsigned is never below a signed negative.
      if (a.is_number_unsigned() && b.is_number_unsigned()) {
        auto x = a.get<uint64_t>(), y = b.get<uint64_t>();
        return x < y ? -1 : (x > y ? 1 : 0);
      }
      if (a.is_number_unsigned()) {
        int64_t y = b.get<int64_t>();
        if (y < 0) return 1;
        auto x = a.get<uint64_t>();
        return x < static_cast<uint64_t>(y) ? -1 : (x > static_cast<uint64_t>(y) ? 1 : 0);
      }
      return -CompareNumbers(b, a);
    }
    auto x = a.get<int64_t>(), y = b.get<int64_t>();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  double x = a.get<double>(), y = b.get<double>();
  return x < y ? -1 : (x > y ? 1 : 0);
}

int CompareStrings(std::string_view a, std::string_view b) {
  int c = a.compare(b);
  return c < 0 ? -1 : (c > 0 ? 1 : 0);
}

// Decodes one UTF-8 sequence at s[i]; returns the code point and advances i, or -1 (and
// advances one byte) for an invalid sequence.

void AppendGoJsonString(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out.push_back('"');
  size_t i = 0;
  while (i < s.size()) {
    size_t start = i;
    int32_t cp = core::DecodeUtf8(s, i);
    if (cp < 0) {
      out += "\\ufffd";
      continue;
    }
    switch (cp) {
      case '"':
        out += "\\\"";
        continue;
      case '\\':
        out += "\\\\";
        continue;
      case '\n':
        out += "\\n";
        continue;
      case '\r':
        out += "\\r";
        continue;
      case '\t':
        out += "\\t";
        continue;
      default:
        break;
    }
    if (cp < 0x20 || cp == '<' || cp == '>' || cp == '&') {
      out += "\\u00";
      out.push_back(kHex[cp >> 4]);
      out.push_back(kHex[cp & 0xF]);
    } else if (cp == 0x2028 || cp == 0x2029) {
      out += cp == 0x2028 ? "\\u2028" : "\\u2029";
    } else {
      out.append(s.substr(start, i - start));
    }
  }
  out.push_back('"');
}

void AppendGoFloat(std::string& out, double f) {
  char buf[64];
  double abs = std::fabs(f);
  bool exp = abs != 0 && (abs < 1e-6 || abs >= 1e21);
  auto res = std::to_chars(buf, buf + sizeof(buf), f,
                           exp ? std::chars_format::scientific : std::chars_format::fixed);
  std::string s(buf, res.ptr);
  if (exp) {
    // Go writes e-7, not e-07.
    size_t n = s.size();
    if (n >= 4 && s[n - 4] == 'e' && s[n - 3] == '-' && s[n - 2] == '0') s.erase(n - 2, 1);
  }
  out += s;
}

void AppendGoJson(std::string& out, const Json& v) {
  switch (v.type()) {
    case Json::value_t::null:
      out += "null";
      return;
    case Json::value_t::boolean:
      out += v.get<bool>() ? "true" : "false";
      return;
    case Json::value_t::number_integer:
      out += std::to_string(v.get<int64_t>());
      return;
    case Json::value_t::number_unsigned:
      out += std::to_string(v.get<uint64_t>());
      return;
    case Json::value_t::number_float:
      AppendGoFloat(out, v.get<double>());
      return;
    case Json::value_t::string:
      AppendGoJsonString(out, v.get_ref<const std::string&>());
      return;
    case Json::value_t::array: {
      out.push_back('[');
      bool first = true;
      for (const auto& e : v) {
        if (!first) out.push_back(',');
        first = false;
        AppendGoJson(out, e);
      }
      out.push_back(']');
      return;
    }
    case Json::value_t::object: {
      out.push_back('{');
      bool first = true;
      for (const auto& [k, e] : v.items()) {  // nlohmann objects iterate in key order
        if (!first) out.push_back(',');
        first = false;
        AppendGoJsonString(out, k);
        out.push_back(':');
        AppendGoJson(out, e);
      }
      out.push_back('}');
      return;
    }
    default:
      out += "null";
      return;
  }
}

// Go's %v of a float64: shortest representation, exponent form outside [1e-4, 1e21).
std::string GoFloatString(double f) {
  char buf[64];
  double abs = std::fabs(f);
  bool exp = abs != 0 && (abs < 1e-4 || abs >= 1e21);
  auto res = std::to_chars(buf, buf + sizeof(buf), f,
                           exp ? std::chars_format::scientific : std::chars_format::fixed);
  return std::string(buf, res.ptr);
}

// Kubernetes' value.ToString: strings quoted, numbers and booleans bare, lists bracketed.
std::string ValueToString(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::boolean:
      return v.get<bool>() ? "true" : "false";
    case Json::value_t::number_integer:
      return std::to_string(v.get<int64_t>());
    case Json::value_t::number_unsigned:
      return std::to_string(v.get<uint64_t>());
    case Json::value_t::number_float:
      return GoFloatString(v.get<double>());
    case Json::value_t::string:
      return core::GoQuote(v.get_ref<const std::string&>());
    case Json::value_t::array: {
      std::string out = "[";
      bool first = true;
      for (const auto& e : v) {
        if (!first) out += ",";
        first = false;
        out += ValueToString(e);
      }
      return out + "]";
    }
    case Json::value_t::object: {
      std::string out;
      for (const auto& [k, e] : v.items()) out += k + "=" + ValueToString(e);
      return out;
    }
    default:
      return "{{undefined}}";
  }
}

int CompareKeyFields(const PathElement::KeyFields& a, const PathElement::KeyFields& b) {
  size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    if (int c = CompareStrings(a[i].first, b[i].first); c != 0) return c;
    if (int c = CompareJsonValues(a[i].second, b[i].second); c != 0) return c;
  }
  return a.size() < b.size() ? -1 : (a.size() > b.size() ? 1 : 0);
}

}  // namespace

int CompareJsonValues(const Json& a, const Json& b) {
  int ra = TypeRank(a), rb = TypeRank(b);
  if (ra != rb) return ra < rb ? -1 : 1;
  switch (ra) {
    case 0:
      return 0;
    case 1:
      return static_cast<int>(a.get<bool>()) - static_cast<int>(b.get<bool>());
    case 2:
      return CompareNumbers(a, b);
    case 3:
      return CompareStrings(a.get_ref<const std::string&>(), b.get_ref<const std::string&>());
    case 4: {
      size_t n = std::min(a.size(), b.size());
      for (size_t i = 0; i < n; ++i) {
        if (int c = CompareJsonValues(a[i], b[i]); c != 0) return c;
      }
      return a.size() < b.size() ? -1 : (a.size() > b.size() ? 1 : 0);
    }
    case 5: {
      auto ia = a.begin(), ib = b.begin();
      for (; ia != a.end() && ib != b.end(); ++ia, ++ib) {
        if (int c = CompareStrings(ia.key(), ib.key()); c != 0) return c;
        if (int c = CompareJsonValues(*ia, *ib); c != 0) return c;
      }
      if (ia == a.end() && ib == b.end()) return 0;
      return ia == a.end() ? -1 : 1;
    }
    default:
      return 0;
  }
}

std::string GoJson(const Json& value) {
  std::string out;
  AppendGoJson(out, value);
  return out;
}

// ---------------------------------------------------------------------------------------------
// PathElement

PathElement PathElement::Field(std::string name) {
  PathElement e;
  e.kind_ = Kind::kField;
  e.name_ = std::move(name);
  return e;
}

PathElement PathElement::Key(KeyFields fields) {
  // Stable sort, then keep the last of equal names.
  std::stable_sort(fields.begin(), fields.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  KeyFields unique;
  for (auto& f : fields) {
    if (!unique.empty() && unique.back().first == f.first) {
      unique.back() = std::move(f);
    } else {
      unique.push_back(std::move(f));
    }
  }
  PathElement e;
  e.kind_ = Kind::kKey;
  e.key_ = std::move(unique);
  return e;
}

PathElement PathElement::Value(Json value) {
  PathElement e;
  e.kind_ = Kind::kValue;
  e.value_ = std::move(value);
  return e;
}

PathElement PathElement::Index(int64_t index) {
  PathElement e;
  e.kind_ = Kind::kIndex;
  e.index_ = index;
  return e;
}

namespace {

// Whether `v` nests deeper than `limit`; recursion stops at the limit.
bool TooDeep(const Json& v, int limit) {
  if (!v.is_structured()) return false;
  if (limit == 0) return true;
  for (const auto& e : v) {
    if (TooDeep(e, limit - 1)) return true;
  }
  return false;
}

core::Result<Json> ParseElementJson(std::string_view text, std::string_view body) {
  // nlohmann directly, without exceptions: it also refuses numbers a double cannot hold
  // (as Go's decoder does), which machinery::ParseJson reports by throwing.
  Json value = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) {
    return core::BadRequest(
        fmt::format("invalid path element {}: invalid JSON", core::GoQuote(text)));
  }
  // Keys and values are scalars in practice; the bound keeps every later walk shallow.
  if (TooDeep(value, kMaxElementDepth)) {
    return core::BadRequest(
        fmt::format("invalid path element {}: nesting is too deep", core::GoQuote(text)));
  }
  return value;
}

}  // namespace

core::Result<PathElement> PathElement::Parse(std::string_view text) {
  if (text.size() < 2) {
    return core::BadRequest(
        fmt::format("invalid path element {}: key must be 2 characters long", core::GoQuote(text)));
  }
  if (text[1] != ':') {
    return core::BadRequest(
        fmt::format("invalid path element {}: missing colon", core::GoQuote(text)));
  }
  std::string_view body = text.substr(2);
  switch (text[0]) {
    case 'f':
      return Field(std::string(body));
    case 'v': {
      KLUTCH_ASSIGN_OR_RETURN(Json value, ParseElementJson(text, body));
      return Value(std::move(value));
    }
    case 'k': {
      KLUTCH_ASSIGN_OR_RETURN(Json value, ParseElementJson(text, body));
      if (!value.is_object()) {
        return core::BadRequest(
            fmt::format("invalid path element {}: key must be a JSON object", core::GoQuote(text)));
      }
      KeyFields fields;
      for (auto& [k, v] : value.items()) fields.emplace_back(k, v);
      return Key(std::move(fields));
    }
    case 'i': {
      std::string_view digits = body;
      bool negative = false;
      if (!digits.empty() && (digits[0] == '+' || digits[0] == '-')) {
        negative = digits[0] == '-';
        digits.remove_prefix(1);
      }
      uint64_t magnitude = 0;
      auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), magnitude);
      if (digits.empty() || ec != std::errc() || ptr != digits.data() + digits.size() ||
          magnitude > static_cast<uint64_t>(INT64_MAX)) {
        return core::BadRequest(
            fmt::format("invalid path element {}: index is not an integer", core::GoQuote(text)));
      }
      auto index = static_cast<int64_t>(magnitude);
      return Index(negative ? -index : index);
    }
    default:
      return core::NotFound(
          fmt::format("invalid path element {}: unknown path element type", core::GoQuote(text)));
  }
}

std::string PathElement::Serialize() const {
  switch (kind_) {
    case Kind::kField:
      return "f:" + name_;
    case Kind::kKey: {
      std::string out = "k:{";
      bool first = true;
      for (const auto& [name, value] : key_) {
        if (!first) out.push_back(',');
        first = false;
        AppendGoJsonString(out, name);
        out.push_back(':');
        AppendGoJson(out, value);
      }
      out.push_back('}');
      return out;
    }
    case Kind::kValue:
      return "v:" + GoJson(value_);
    case Kind::kIndex:
      return "i:" + std::to_string(index_);
  }
  return "";
}

std::string PathElement::ToString() const {
  switch (kind_) {
    case Kind::kField:
      return "." + name_;
    case Kind::kKey: {
      std::string out = "[";
      bool first = true;
      for (const auto& [name, value] : key_) {
        if (!first) out.push_back(',');
        first = false;
        out += name + "=" + ValueToString(value);
      }
      return out + "]";
    }
    case Kind::kValue:
      return fmt::format("[={}]", ValueToString(value_));
    case Kind::kIndex:
      // fmt rather than string concatenation: GCC 12 reports a bogus -Wrestrict on the latter.
      return fmt::format("[{}]", index_);
  }
  return "{{invalid path element}}";
}

int PathElement::Compare(const PathElement& other) const {
  if (kind_ != other.kind_) return kind_ < other.kind_ ? -1 : 1;
  switch (kind_) {
    case Kind::kField:
      return CompareStrings(name_, other.name_);
    case Kind::kKey:
      return CompareKeyFields(key_, other.key_);
    case Kind::kValue:
      return CompareJsonValues(value_, other.value_);
    case Kind::kIndex:
      return index_ < other.index_ ? -1 : (index_ > other.index_ ? 1 : 0);
  }
  return 0;
}

std::string PathToString(const Path& path) {
  std::string out;
  for (const auto& e : path) out += e.ToString();
  return out;
}

// ---------------------------------------------------------------------------------------------
// FieldSet

namespace {

template <typename T, typename KeyOf>
auto LowerBound(T& vec, const PathElement& e, KeyOf key_of) {
  return std::lower_bound(vec.begin(), vec.end(), e,
                          [&](const auto& item, const PathElement& x) { return key_of(item) < x; });
}

const PathElement& SelfKey(const PathElement& e) { return e; }

}  // namespace

FieldSet FieldSet::FromPaths(const std::vector<Path>& paths) {
  FieldSet set;
  for (const auto& p : paths) set.Insert(p);
  return set;
}

FieldSet* FieldSet::Descend(const PathElement& element) {
  auto it =
      LowerBound(children_, element, [](const Node& n) -> const PathElement& { return n.element; });
  if (it == children_.end() || !(it->element == element)) {
    it = children_.insert(it, Node{element, FieldSet()});
  }
  return &it->set;
}

void FieldSet::Insert(const Path& path) {
  if (path.empty()) return;
  FieldSet* node = this;
  for (size_t i = 0; i + 1 < path.size(); ++i) node = node->Descend(path[i]);
  const PathElement& last = path.back();
  auto it = LowerBound(node->members_, last, SelfKey);
  if (it == node->members_.end() || !(*it == last)) node->members_.insert(it, last);
}

bool FieldSet::HasMember(const PathElement& element) const {
  return std::binary_search(members_.begin(), members_.end(), element);
}

const FieldSet* FieldSet::Child(const PathElement& element) const {
  auto it =
      LowerBound(children_, element, [](const Node& n) -> const PathElement& { return n.element; });
  if (it == children_.end() || !(it->element == element)) return nullptr;
  return &it->set;
}

std::vector<std::pair<PathElement, const FieldSet*>> FieldSet::children() const {
  std::vector<std::pair<PathElement, const FieldSet*>> out;
  out.reserve(children_.size());
  for (const auto& n : children_) out.emplace_back(n.element, &n.set);
  return out;
}

bool FieldSet::Has(const Path& path) const {
  if (path.empty()) return false;
  const FieldSet* node = this;
  for (size_t i = 0; i + 1 < path.size(); ++i) {
    node = node->Child(path[i]);
    if (node == nullptr) return false;
  }
  return node->HasMember(path.back());
}

bool FieldSet::Empty() const {
  if (!members_.empty()) return false;
  for (const auto& n : children_) {
    if (!n.set.Empty()) return false;
  }
  return true;
}

size_t FieldSet::Size() const {
  size_t n = members_.size();
  for (const auto& c : children_) n += c.set.Size();
  return n;
}

void FieldSet::Normalize() {
  for (auto& n : children_) n.set.Normalize();
  std::erase_if(children_, [](const Node& n) { return n.set.Empty(); });
}

FieldSet FieldSet::Union(const FieldSet& other) const {
  FieldSet out;
  std::set_union(members_.begin(), members_.end(), other.members_.begin(), other.members_.end(),
                 std::back_inserter(out.members_));
  auto a = children_.begin(), b = other.children_.begin();
  while (a != children_.end() || b != other.children_.end()) {
    if (b == other.children_.end() || (a != children_.end() && a->element < b->element)) {
      out.children_.push_back(*a++);
    } else if (a == children_.end() || b->element < a->element) {
      out.children_.push_back(*b++);
    } else {
      out.children_.push_back(Node{a->element, a->set.Union(b->set)});
      ++a, ++b;
    }
  }
  return out;
}

FieldSet FieldSet::Intersection(const FieldSet& other) const {
  FieldSet out;
  std::set_intersection(members_.begin(), members_.end(), other.members_.begin(),
                        other.members_.end(), std::back_inserter(out.members_));
  for (const auto& n : children_) {
    if (const FieldSet* o = other.Child(n.element)) {
      FieldSet sub = n.set.Intersection(*o);
      if (!sub.Empty()) out.children_.push_back(Node{n.element, std::move(sub)});
    }
  }
  return out;
}

FieldSet FieldSet::Difference(const FieldSet& other) const {
  FieldSet out;
  std::set_difference(members_.begin(), members_.end(), other.members_.begin(),
                      other.members_.end(), std::back_inserter(out.members_));
  for (const auto& n : children_) {
    const FieldSet* o = other.Child(n.element);
    if (o == nullptr) {
      out.children_.push_back(n);
      continue;
    }
    FieldSet sub = n.set.Difference(*o);
    if (!sub.Empty()) out.children_.push_back(Node{n.element, std::move(sub)});
  }
  return out;
}

FieldSet FieldSet::RecursiveDifference(const FieldSet& other) const {
  FieldSet out;
  std::set_difference(members_.begin(), members_.end(), other.members_.begin(),
                      other.members_.end(), std::back_inserter(out.members_));
  for (const auto& n : children_) {
    if (other.HasMember(n.element)) continue;
    const FieldSet* o = other.Child(n.element);
    if (o == nullptr) {
      out.children_.push_back(n);
      continue;
    }
    FieldSet sub = n.set.RecursiveDifference(*o);
    if (!sub.Empty()) out.children_.push_back(Node{n.element, std::move(sub)});
  }
  return out;
}

FieldSet FieldSet::Leaves() const {
  FieldSet out;
  for (const auto& m : members_) {
    if (Child(m) == nullptr) out.members_.push_back(m);
  }
  for (const auto& n : children_) {
    FieldSet sub = n.set.Leaves();
    if (!sub.Empty()) out.children_.push_back(Node{n.element, std::move(sub)});
  }
  return out;
}

void FieldSet::IterateFrom(Path& prefix, const std::function<void(const Path&)>& visit) const {
  for (const auto& m : members_) {
    prefix.push_back(m);
    visit(prefix);
    prefix.pop_back();
  }
  for (const auto& n : children_) {
    prefix.push_back(n.element);
    n.set.IterateFrom(prefix, visit);
    prefix.pop_back();
  }
}

void FieldSet::Iterate(const std::function<void(const Path&)>& visit) const {
  Path prefix;
  IterateFrom(prefix, visit);
}

std::vector<Path> FieldSet::Paths() const {
  std::vector<Path> out;
  Iterate([&](const Path& p) { out.push_back(p); });
  return out;
}

std::string FieldSet::ToString() const {
  std::string out;
  Iterate([&](const Path& p) {
    if (!out.empty()) out.push_back('\n');
    out += PathToString(p);
  });
  return out;
}

bool FieldSet::operator==(const FieldSet& other) const {
  if (members_ != other.members_ || children_.size() != other.children_.size()) return false;
  for (size_t i = 0; i < children_.size(); ++i) {
    if (!(children_[i].element == other.children_[i].element) ||
        !(children_[i].set == other.children_[i].set)) {
      return false;
    }
  }
  return true;
}

Json FieldSet::ToJson() const {
  Json out = Json::object();
  for (const auto& m : members_) out[m.Serialize()] = Json::object();
  for (const auto& n : children_) {
    Json child = n.set.ToJson();
    if (HasMember(n.element)) child["."] = Json::object();
    out[n.element.Serialize()] = std::move(child);
  }
  return out;
}

core::Status FieldSet::ReadFieldsV1(const Json& json, int depth, FieldSet& into, bool* is_member) {
  // Like Kubernetes' reader: null reads as an empty object, "." marks the node whatever its
  // value, anything else must be an object.
  if (json.is_null()) {
    *is_member = true;
    return core::Status::Ok();
  }
  if (!json.is_object()) {
    return core::BadRequest(
        fmt::format("fieldsV1: expected a JSON object, found {}", json.type_name()));
  }
  if (depth > kMaxFieldsDepth) return core::BadRequest("fieldsV1: nesting is too deep");
  bool any_known = false;
  for (const auto& [key, value] : json.items()) {
    if (key == ".") {
      *is_member = true;
      continue;
    }
    auto element = PathElement::Parse(key);
    if (!element.ok()) {
      if (core::IsNotFound(element.status())) continue;  // an element type from the future
      return core::Status(element.status()).Annotate("fieldsV1");
    }
    any_known = true;
    bool child_member = false;
    KLUTCH_RETURN_IF_ERROR(ReadFieldsV1(value, depth + 1, *into.Descend(*element), &child_member));
    if (child_member) into.Insert(Path{*element});
  }
  // A node with nothing known below it is a plain member.
  if (!any_known) *is_member = true;
  return core::Status::Ok();
}

core::Result<FieldSet> FieldSet::FromJson(const Json& fields_v1) {
  if (!fields_v1.is_object()) {
    return core::BadRequest(
        fmt::format("fieldsV1: expected a JSON object, found {}", fields_v1.type_name()));
  }
  FieldSet out;
  bool ignored = false;
  KLUTCH_RETURN_IF_ERROR(ReadFieldsV1(fields_v1, 0, out, &ignored));
  out.Normalize();
  return out;
}

}  // namespace klutch::machinery
