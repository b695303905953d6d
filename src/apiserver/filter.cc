#include "apiserver/filter.h"

#include <fmt/format.h>

#include "machinery/object.h"
#include "machinery/selector.h"

namespace klutch::apiserver {

using machinery::Find;

struct Filter::Impl {
  machinery::LabelSelector labels;
  machinery::FieldSelector fields;
};

core::Result<Filter> Filter::Make(const ResourceInfo& r, const std::string& labels,
                                  const std::string& fields) {
  Filter f;
  auto impl = std::make_shared<Impl>();
  auto ls = machinery::LabelSelector::Parse(labels);
  if (!ls.ok()) return core::BadRequest(ls.status().message());
  impl->labels = std::move(ls).value();
  auto fs = machinery::FieldSelector::Parse(fields);
  if (!fs.ok()) return core::BadRequest(fs.status().message());
  impl->fields = std::move(fs).value();
  for (const auto& req : impl->fields.requirements()) {
    bool known = req.field == "metadata.name" || req.field == "metadata.namespace";
    if (!known && r.strategy.fields)
      known = r.strategy.fields(Json::object(), req.field).has_value();
    if (!known) {
      return core::BadRequest(fmt::format("field label not supported: {}", req.field));
    }
  }
  f.impl_ = std::move(impl);
  return f;
}

bool Filter::Empty() const { return !impl_ || (impl_->labels.Empty() && impl_->fields.Empty()); }

bool Filter::KeyOnly() const {
  if (!impl_) return true;
  if (!impl_->labels.Empty()) return false;
  for (const auto& req : impl_->fields.requirements()) {
    if (!req.equal || (req.field != "metadata.name" && req.field != "metadata.namespace")) {
      return false;
    }
  }
  return true;
}

bool Filter::Matches(const ResourceInfo& r, const Json& object) const {
  if (!impl_) return true;
  if (!impl_->labels.Empty()) {
    const Json* labels = Find(object, {"metadata", "labels"});
    if (!impl_->labels.Matches(labels ? *labels : Json())) return false;
  }
  if (!impl_->fields.Empty()) {
    return impl_->fields.Matches([&](std::string_view field) -> std::optional<std::string> {
      if (field == "metadata.name") return machinery::Name(object);
      if (field == "metadata.namespace") return machinery::Namespace(object);
      if (r.strategy.fields) return r.strategy.fields(object, field);
      return std::nullopt;
    });
  }
  return true;
}

std::string Filter::PinnedName() const {
  if (!impl_) return "";
  for (const auto& req : impl_->fields.requirements()) {
    if (req.field == "metadata.name" && req.equal) return req.value;
  }
  return "";
}

std::string Filter::PinnedNamespace() const {
  if (!impl_) return "";
  for (const auto& req : impl_->fields.requirements()) {
    if (req.field == "metadata.namespace" && req.equal) return req.value;
  }
  return "";
}

}  // namespace klutch::apiserver
