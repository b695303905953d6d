#include "machinery/json_patch.h"

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fmt/format.h"

namespace klutch::machinery {

namespace {

enum class OpKind { kAdd, kRemove, kReplace, kMove, kCopy, kTest };

// One validated operation; pointers are already split into unescaped reference tokens.
struct Operation {
  OpKind kind;
  std::string_view name;  // "add", ... for messages
  std::string path;       // as written, for messages
  std::vector<std::string> path_tokens;
  std::string from;
  std::vector<std::string> from_tokens;
  const Json* value = nullptr;  // points into the patch
};

std::optional<OpKind> KindFromName(std::string_view name) {
  if (name == "add") return OpKind::kAdd;
  if (name == "remove") return OpKind::kRemove;
  if (name == "replace") return OpKind::kReplace;
  if (name == "move") return OpKind::kMove;
  if (name == "copy") return OpKind::kCopy;
  if (name == "test") return OpKind::kTest;
  return std::nullopt;
}

std::string_view TypeName(const Json& v) { return v.type_name(); }

// Splits an RFC 6901 pointer into unescaped reference tokens ("" -> no tokens, the whole
// document). Returns a description of the problem when the pointer is malformed.
std::optional<std::string> SplitPointer(std::string_view pointer, std::vector<std::string>* out) {
  out->clear();
  if (pointer.empty()) return std::nullopt;
  if (pointer.front() != '/') return std::string("must be empty or start with '/'");
  std::string token;
  for (size_t i = 1; i < pointer.size(); ++i) {
    char c = pointer[i];
    if (c == '/') {
      out->push_back(std::move(token));
      token.clear();
    } else if (c == '~') {
      // Left-to-right decoding gives RFC 6901's order: "~01" is "~1", not "/".
      char next = i + 1 < pointer.size() ? pointer[i + 1] : '\0';
      if (next == '0') {
        token += '~';
      } else if (next == '1') {
        token += '/';
      } else {
        return std::string("'~' must be followed by '0' or '1'");
      }
      ++i;
    } else {
      token += c;
    }
  }
  out->push_back(std::move(token));
  return std::nullopt;
}

// RFC 6901 array-index: "0" or a decimal without leading zeros. Values beyond size_t saturate,
// which every bounds check then rejects.
std::optional<size_t> ParseArrayIndex(std::string_view token) {
  if (token.empty() || (token.size() > 1 && token[0] == '0')) return std::nullopt;
  size_t value = 0;
  constexpr size_t kMax = std::numeric_limits<size_t>::max();
  for (char c : token) {
    if (c < '0' || c > '9') return std::nullopt;
    size_t digit = static_cast<size_t>(c - '0');
    value = value > (kMax - digit) / 10 ? kMax : value * 10 + digit;
  }
  return value;
}

// The node `tokens[0, count)` names, or nullptr when it does not exist.
Json* Walk(Json& root, const std::vector<std::string>& tokens, size_t count) {
  Json* node = &root;
  for (size_t i = 0; i < count; ++i) {
    const std::string& token = tokens[i];
    if (node->is_object()) {
      auto it = node->find(token);
      if (it == node->end()) return nullptr;
      node = &*it;
    } else if (node->is_array()) {
      std::optional<size_t> index = ParseArrayIndex(token);
      if (!index || *index >= node->size()) return nullptr;
      node = &(*node)[*index];
    } else {
      return nullptr;
    }
  }
  return node;
}

core::Status MissingPath(std::string_view op, std::string_view path) {
  return core::Invalid(fmt::format(
      "{} operation does not apply: doc is missing path: \"{}\": missing value", op, path));
}

// Inserts `value` at `tokens` (RFC 6902 "add" semantics). `op` and `what` only shape messages:
// for move/copy the target is their "destination path".
core::Status AddAt(Json& doc, const std::vector<std::string>& tokens, std::string_view path,
                   Json value, std::string_view op, bool destination) {
  if (tokens.empty()) {
    doc = std::move(value);
    return core::Status::Ok();
  }
  Json* parent = Walk(doc, tokens, tokens.size() - 1);
  if (parent == nullptr || !(parent->is_object() || parent->is_array())) {
    if (destination) {
      return core::Invalid(fmt::format(
          "{} operation does not apply: doc is missing destination path: {}: missing value", op,
          path));
    }
    return MissingPath(op, path);
  }
  const std::string& key = tokens.back();
  if (parent->is_object()) {
    (*parent)[key] = std::move(value);
    return core::Status::Ok();
  }
  if (key == "-") {
    parent->push_back(std::move(value));
    return core::Status::Ok();
  }
  std::optional<size_t> index = ParseArrayIndex(key);
  if (!index) {
    return core::Invalid(fmt::format(
        "error in {} for path: '{}': value was not a proper array index: '{}'", op, path, key));
  }
  if (*index > parent->size()) {
    return core::Invalid(fmt::format(
        "error in {} for path: '{}': Unable to access invalid index: {}: invalid index referenced",
        op, path, key));
  }
  auto& array = parent->get_ref<Json::array_t&>();
  array.insert(array.begin() + static_cast<std::ptrdiff_t>(*index), std::move(value));
  return core::Status::Ok();
}

// Removes and returns the node at `tokens` (which must be non-empty), or nullopt if missing.
std::optional<Json> TakeAt(Json& doc, const std::vector<std::string>& tokens) {
  Json* parent = Walk(doc, tokens, tokens.size() - 1);
  if (parent == nullptr) return std::nullopt;
  const std::string& key = tokens.back();
  if (parent->is_object()) {
    auto it = parent->find(key);
    if (it == parent->end()) return std::nullopt;
    Json value = std::move(*it);
    parent->erase(it);
    return value;
  }
  if (parent->is_array()) {
    std::optional<size_t> index = ParseArrayIndex(key);
    if (!index || *index >= parent->size()) return std::nullopt;
    auto& array = parent->get_ref<Json::array_t&>();
    Json value = std::move(array[*index]);
    array.erase(array.begin() + static_cast<std::ptrdiff_t>(*index));
    return value;
  }
  return std::nullopt;
}

bool IsProperPrefix(const std::vector<std::string>& prefix, const std::vector<std::string>& of) {
  if (prefix.size() >= of.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    if (prefix[i] != of[i]) return false;
  }
  return true;
}

// Approximate size of `value` as compact JSON, stopping early once it exceeds `cap` (so that
// measuring a huge value costs no more than the budget it is checked against).
size_t ApproximateJsonSize(const Json& value, size_t cap) {
  size_t total = 0;
  std::vector<const Json*> stack{&value};
  while (!stack.empty() && total <= cap) {
    const Json* node = stack.back();
    stack.pop_back();
    switch (node->type()) {
      case Json::value_t::object:
        total += 2 + (node->empty() ? 0 : node->size() - 1);
        for (const auto& [key, child] : node->items()) {
          total += key.size() + 3;  // quotes and colon
          stack.push_back(&child);
        }
        break;
      case Json::value_t::array:
        total += 2 + (node->empty() ? 0 : node->size() - 1);
        for (const Json& child : *node) stack.push_back(&child);
        break;
      case Json::value_t::string:
        total += node->get_ref<const std::string&>().size() + 2;
        break;
      case Json::value_t::boolean:
        total += node->get<bool>() ? 4 : 5;
        break;
      case Json::value_t::null:
        total += 4;
        break;
      default:  // numbers (and the never-parsed binary/discarded kinds)
        total += node->dump().size();
        break;
    }
  }
  return total;
}

// Reads member `name` of operation `index` as a string pointer and splits it.
core::Status ReadPointer(const Json& op, size_t index, std::string_view op_name,
                         std::string_view name, std::string* text,
                         std::vector<std::string>* tokens) {
  auto it = op.find(std::string(name));
  if (it == op.end()) {
    return core::BadRequest(fmt::format(
        "invalid JSON patch: operation {} (\"{}\") is missing \"{}\"", index, op_name, name));
  }
  if (!it->is_string()) {
    return core::BadRequest(
        fmt::format("invalid JSON patch: operation {} (\"{}\"): \"{}\" must be a string, not {}",
                    index, op_name, name, TypeName(*it)));
  }
  *text = it->get<std::string>();
  if (auto problem = SplitPointer(*text, tokens)) {
    return core::BadRequest(
        fmt::format("invalid JSON patch: operation {} (\"{}\"): invalid JSON pointer \"{}\" in "
                    "\"{}\": {}",
                    index, op_name, *text, name, *problem));
  }
  return core::Status::Ok();
}

core::Result<std::vector<Operation>> DecodePatch(const Json& patch, size_t max_operations) {
  if (!patch.is_array()) {
    return core::BadRequest(fmt::format(
        "invalid JSON patch: expected an array of operations, got {}", TypeName(patch)));
  }
  if (patch.size() > max_operations) {
    return core::Status(core::Reason::kRequestEntityTooLarge,
                        fmt::format("The allowed maximum operations in a JSON patch is {}, got {}",
                                    max_operations, patch.size()));
  }
  std::vector<Operation> ops;
  ops.reserve(patch.size());
  for (size_t i = 0; i < patch.size(); ++i) {
    const Json& raw = patch[i];
    if (!raw.is_object()) {
      return core::BadRequest(fmt::format(
          "invalid JSON patch: operation {} must be an object, not {}", i, TypeName(raw)));
    }
    auto op_it = raw.find("op");
    if (op_it == raw.end() || !op_it->is_string()) {
      return core::BadRequest(
          fmt::format("invalid JSON patch: operation {} is missing a string \"op\" member", i));
    }
    const std::string& name = op_it->get_ref<const std::string&>();
    std::optional<OpKind> kind = KindFromName(name);
    if (!kind) {
      return core::BadRequest(
          fmt::format("invalid JSON patch: operation {}: Unexpected kind: {}", i, name));
    }
    Operation op;
    op.kind = *kind;
    op.name = op_it->get_ref<const std::string&>();
    KLUTCH_RETURN_IF_ERROR(ReadPointer(raw, i, name, "path", &op.path, &op.path_tokens));
    if (*kind == OpKind::kMove || *kind == OpKind::kCopy) {
      KLUTCH_RETURN_IF_ERROR(ReadPointer(raw, i, name, "from", &op.from, &op.from_tokens));
    }
    if (*kind == OpKind::kAdd || *kind == OpKind::kReplace || *kind == OpKind::kTest) {
      auto value = raw.find("value");
      if (value == raw.end()) {
        return core::BadRequest(
            fmt::format("invalid JSON patch: operation {} (\"{}\") is missing \"value\"", i, name));
      }
      op.value = &*value;
    }
    ops.push_back(std::move(op));
  }
  return ops;
}

core::Status Apply(Json& doc, const Operation& op, size_t* copied_bytes,
                   const JsonPatchOptions& options) {
  switch (op.kind) {
    case OpKind::kAdd:
      return AddAt(doc, op.path_tokens, op.path, *op.value, op.name, /*destination=*/false);

    case OpKind::kRemove: {
      // Removing the whole document is not meaningful for an API object; evanphx/json-patch
      // reports it as a missing path as well.
      if (op.path_tokens.empty() || !TakeAt(doc, op.path_tokens)) {
        return MissingPath(op.name, op.path);
      }
      return core::Status::Ok();
    }

    case OpKind::kReplace: {
      Json* target = Walk(doc, op.path_tokens, op.path_tokens.size());
      if (target == nullptr) return MissingPath(op.name, op.path);
      *target = *op.value;
      return core::Status::Ok();
    }

    case OpKind::kMove: {
      Json* source = Walk(doc, op.from_tokens, op.from_tokens.size());
      if (source == nullptr) {
        return core::Invalid(fmt::format(
            "move operation does not apply: doc is missing from path: {}: missing value", op.from));
      }
      if (op.from_tokens == op.path_tokens) return core::Status::Ok();
      if (IsProperPrefix(op.from_tokens, op.path_tokens)) {
        return core::Invalid(
            fmt::format("move operation does not apply: cannot move {} into its own child {}",
                        op.from, op.path));
      }
      std::optional<Json> value = TakeAt(doc, op.from_tokens);
      if (!value) {  // unreachable: Walk found it and it is not the root
        return core::Invalid(fmt::format(
            "move operation does not apply: doc is missing from path: {}: missing value", op.from));
      }
      return AddAt(doc, op.path_tokens, op.path, std::move(*value), op.name,
                   /*destination=*/true);
    }

    case OpKind::kCopy: {
      const Json* source = Walk(doc, op.from_tokens, op.from_tokens.size());
      if (source == nullptr) {
        return core::Invalid(fmt::format(
            "copy operation does not apply: doc is missing from path: {}: missing value", op.from));
      }
      size_t remaining = options.max_copy_bytes - *copied_bytes;
      size_t size = ApproximateJsonSize(*source, remaining);
      *copied_bytes += size;
      if (size > remaining) {
        return core::Invalid(
            fmt::format("Unable to complete the copy, the accumulated size increase of copy is at "
                        "least {}, exceeding the limit {}",
                        *copied_bytes, options.max_copy_bytes));
      }
      Json value = *source;  // copy before the insertion may move the source
      return AddAt(doc, op.path_tokens, op.path, std::move(value), op.name, /*destination=*/true);
    }

    case OpKind::kTest: {
      const Json* target = Walk(doc, op.path_tokens, op.path_tokens.size());
      if (target == nullptr) {
        return core::Invalid(fmt::format(
            "test operation does not apply: doc is missing path: \"{}\": missing value", op.path));
      }
      if (*target != *op.value) {
        return core::Invalid(fmt::format("testing value {} failed: test failed", op.path));
      }
      return core::Status::Ok();
    }
  }
  return core::Internal("unknown JSON patch operation");
}

}  // namespace

core::Result<Json> ApplyJsonPatch(const Json& doc, const Json& patch,
                                  const JsonPatchOptions& options) {
  KLUTCH_ASSIGN_OR_RETURN(std::vector<Operation> ops, DecodePatch(patch, options.max_operations));
  Json result = doc;
  size_t copied_bytes = 0;
  for (const Operation& op : ops) {
    KLUTCH_RETURN_IF_ERROR(Apply(result, op, &copied_bytes, options));
  }
  return result;
}

}  // namespace klutch::machinery
