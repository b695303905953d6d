#include "compose/fieldpath.h"

#include <algorithm>
#include <string>

namespace klutch::compose {
namespace {

core::Status BadPath(std::string_view text, size_t offset, std::string_view what) {
  return core::BadRequest("invalid field path \"" + std::string(text) + "\" at offset " +
                          std::to_string(offset) + ": " + std::string(what));
}

bool AllDigits(std::string_view s) {
  return !s.empty() && s.size() <= 9 &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

constexpr int64_t kMaxGrowth = 10000;

// Merges `src` into `dst` (both objects) per policy.
void Merge(Json& dst, const Json& src, MergePolicy policy) {
  const bool force = policy == MergePolicy::kForceMergeObjects ||
                     policy == MergePolicy::kForceMergeObjectsAppendArrays;
  const bool append = policy == MergePolicy::kMergeObjectsAppendArrays ||
                      policy == MergePolicy::kForceMergeObjectsAppendArrays;
  for (auto it = src.begin(); it != src.end(); ++it) {
    auto existing = dst.find(it.key());
    if (existing == dst.end() || existing->is_null()) {
      dst[it.key()] = it.value();
    } else if (existing->is_object() && it->is_object()) {
      Merge(*existing, *it, policy);
    } else if (append && existing->is_array() && it->is_array()) {
      for (const Json& e : *it) {
        if (std::find(existing->begin(), existing->end(), e) == existing->end()) {
          existing->push_back(e);
        }
      }
    } else if (force) {
      *existing = it.value();
    }
  }
}

}  // namespace

core::Result<FieldPath> ParseFieldPath(std::string_view text) {
  FieldPath out;
  if (text.empty()) return BadPath(text, 0, "the path is empty");
  size_t i = 0;
  while (i < text.size()) {
    char c = text[i];
    if (c == '[') {
      size_t close = text.find(']', i + 1);
      if (close == std::string_view::npos) return BadPath(text, i, "unclosed '['");
      std::string_view inner = text.substr(i + 1, close - i - 1);
      if (inner.empty()) return BadPath(text, i, "empty brackets");
      if (inner.find('[') != std::string_view::npos) return BadPath(text, i, "nested '['");
      PathSegment s;
      if (AllDigits(inner)) {
        s.is_index = true;
        s.index = std::stoll(std::string(inner));
      } else {
        // Quotes around a bracketed key are not part of it, as in crossplane-runtime's
        // metadata.annotations['crossplane.io/external-name'].
        size_t first = inner.find_first_not_of("'\"");
        size_t last = inner.find_last_not_of("'\"");
        if (first == std::string_view::npos) return BadPath(text, i, "empty brackets");
        s.field = std::string(inner.substr(first, last - first + 1));
      }
      out.push_back(std::move(s));
      i = close + 1;
      if (i < text.size()) {
        if (text[i] == '.') {
          ++i;
          if (i == text.size()) return BadPath(text, i, "the path ends with '.'");
        } else if (text[i] != '[') {
          return BadPath(text, i, "expected '.' or '[' after ']'");
        }
      }
      continue;
    }
    if (c == ']') return BadPath(text, i, "']' without '['");
    if (c == '.') return BadPath(text, i, "empty segment");
    size_t end = text.find_first_of(".[]", i);
    if (end == std::string_view::npos) end = text.size();
    out.push_back(PathSegment{.field = std::string(text.substr(i, end - i))});
    i = end;
    if (i < text.size() && text[i] == '.') {
      ++i;
      if (i == text.size()) return BadPath(text, i, "the path ends with '.'");
    } else if (i < text.size() && text[i] == ']') {
      return BadPath(text, i, "']' without '['");
    }
  }
  return out;
}

std::string FieldPathToString(const FieldPath& path) {
  std::string out;
  for (const PathSegment& s : path) {
    if (s.is_index) {
      out += "[" + std::to_string(s.index) + "]";
    } else if (s.field.find_first_of(".[]") != std::string::npos) {
      out += "[" + s.field + "]";
    } else {
      if (!out.empty()) out += ".";
      out += s.field;
    }
  }
  return out;
}

const Json* GetPath(const Json& root, const FieldPath& path) {
  const Json* cur = &root;
  for (const PathSegment& s : path) {
    if (s.is_index) {
      if (!cur->is_array() || s.index < 0 || static_cast<size_t>(s.index) >= cur->size()) {
        return nullptr;
      }
      cur = &(*cur)[static_cast<size_t>(s.index)];
    } else {
      if (!cur->is_object()) return nullptr;
      auto it = cur->find(s.field);
      if (it == cur->end()) return nullptr;
      cur = &*it;
    }
  }
  return cur;
}

core::Status SetPath(Json& root, const FieldPath& path, Json value, MergePolicy policy) {
  Json* cur = &root;
  std::string walked;
  for (size_t i = 0; i < path.size(); ++i) {
    const PathSegment& s = path[i];
    const bool last = i + 1 == path.size();
    Json* next;
    if (s.is_index) {
      if (cur->is_null()) *cur = Json::array();
      if (!cur->is_array()) {
        return core::BadRequest("cannot set " + FieldPathToString(path) + ": " +
                                (walked.empty() ? "the object" : walked) + " is not an array");
      }
      if (s.index < 0) {
        return core::BadRequest("cannot set " + FieldPathToString(path) + ": index " +
                                std::to_string(s.index) + " is negative");
      }
      size_t idx = static_cast<size_t>(s.index);
      if (s.index > static_cast<int64_t>(cur->size()) + kMaxGrowth) {
        return core::BadRequest("cannot set " + FieldPathToString(path) + ": index " +
                                std::to_string(s.index) + " is too far past the end of " +
                                (walked.empty() ? "the array" : walked));
      }
      while (cur->size() <= idx) cur->push_back(nullptr);
      next = &(*cur)[idx];
      walked += "[" + std::to_string(s.index) + "]";
    } else {
      if (cur->is_null()) *cur = Json::object();
      if (!cur->is_object()) {
        return core::BadRequest("cannot set " + FieldPathToString(path) + ": " +
                                (walked.empty() ? "the object" : walked) + " is not an object");
      }
      next = &(*cur)[s.field];
      walked += walked.empty() ? s.field : "." + s.field;
    }
    if (last) {
      if (policy == MergePolicy::kReplace || next->is_null() || value.is_null()) {
        *next = std::move(value);
      } else {
        // The value at the path merges as a nested one would (crossplane-runtime wraps both
        // in a map for mergo): a scalar or array already there is kept by the MergeObjects
        // policies, not replaced.
        Json dst = Json::object();
        dst["v"] = std::move(*next);
        Json src = Json::object();
        src["v"] = std::move(value);
        Merge(dst, src, policy);
        *next = std::move(dst["v"]);
      }
      return core::Status::Ok();
    }
    cur = next;
  }
  root = std::move(value);  // the empty path
  return core::Status::Ok();
}

bool DeletePath(Json& root, const FieldPath& path) {
  if (path.empty()) return false;
  FieldPath parent(path.begin(), path.end() - 1);
  const Json* p = GetPath(root, parent);
  if (!p) return false;
  Json& target = const_cast<Json&>(*p);
  const PathSegment& s = path.back();
  if (s.is_index) {
    if (!target.is_array() || s.index < 0 || static_cast<size_t>(s.index) >= target.size()) {
      return false;
    }
    target.erase(static_cast<size_t>(s.index));
    return true;
  }
  if (!target.is_object()) return false;
  return target.erase(s.field) > 0;
}

}  // namespace klutch::compose
