#include "broker/backup_api.h"

#include <fmt/format.h>

#include "broker/http_responses.h"
#include "core/strings.h"
#include "machinery/object.h"

namespace klutch::broker {
namespace {

Json BackupJson(const BackupRecord& b) {
  return {{"id", b.id},
          {"size", b.size},
          {"status", b.status},
          {"triggered_at", b.triggered_at},
          {"finished_at", b.finished_at.empty() ? Json() : Json(b.finished_at)},
          {"downloadable", false},
          {"message", b.message}};
}

Json RestoreJson(const RestoreRecord& x) {
  return {{"id", x.id},
          {"backup_id", x.backup_id},
          {"status", x.status},
          {"triggered_at", x.triggered_at},
          {"finished_at", x.finished_at.empty() ? Json() : Json(x.finished_at)},
          {"message", x.message}};
}

http::Response NoSuchInstance(std::string_view id) {
  return ErrorResponse(404, "NotFound", fmt::format("instance {} not found", id));
}

std::optional<int64_t> PositiveId(const http::PathParams& p, std::string_view name) {
  auto v = core::ParseInt64(p.Get(name));
  if (!v || *v <= 0) return std::nullopt;
  return v;
}

// The backup manager's answer to an outcome no route answers in its own way.
http::Response BackupFailure(const RegistryResult& result, std::string_view id) {
  switch (result.outcome) {
    case Outcome::kNoInstance:
      return NoSuchInstance(id);
    case Outcome::kNotFound:
      return ErrorResponse(404, "NotFound", result.message);
    case Outcome::kNotReady:
    case Outcome::kBusy:
      return ErrorResponse(422, "", result.message);
    case Outcome::kConflict:
      return ErrorResponse(409, "", result.message);
    case Outcome::kInUse:
      return ErrorResponse(423, "", result.message);
    case Outcome::kInvalid:
      return ErrorResponse(400, "", result.message);
    default:
      return ErrorResponse(500, "", result.message);
  }
}

// The settings of PUT /instances/{id}, checked: kInvalid naming what is wrong.
core::Result<Json> ParseBackupSettings(std::string_view text) {
  auto body = machinery::ParseJson(text);
  if (!body.ok() || !body->is_object()) {
    return core::Invalid("the request body must be a JSON object");
  }
  Json update = Json::object();
  for (const auto& [k, v] : body->items()) {
    if (k == "encryption_key") {
      const auto* s = v.get_ptr<const std::string*>();
      if (s == nullptr || s->size() < 8) {
        return core::Invalid("encryption_key must be a string of at least 8 characters");
      }
      update[k] = *s;
    } else if (k == "exclude_from_auto_backup" || k == "credentials_updated_by_user") {
      if (!v.is_boolean()) return core::Invalid(fmt::format("{} must be true or false", k));
      update[k] = v;
    } else {
      return core::Invalid(
          fmt::format("unknown field {}; send encryption_key, "
                      "exclude_from_auto_backup or credentials_updated_by_user",
                      core::GoQuote(k)));
    }
  }
  if (update.empty()) return core::Invalid("send at least one setting");
  return update;
}

}  // namespace

http::RouteHandler BackupApi::Route(Handler fn) {
  return [this, fn](http::Request& r, const http::PathParams& p) -> http::Response {
    std::string base(p.Get("base"));
    if (!IsBackupManagerBase(base)) return NotServedHere(r);
    if (auto e = CheckPathIds(p)) return ErrorResponse(*e);
    return (this->*fn)(r, p, BackupManagerType(base));
  };
}

void BackupApi::AddRoutes(http::Router& router) {
  const std::string instance = "/{base}/instances/{instance}";
  router.Get("/{base}/v2/healthy", Route(&BackupApi::Healthy));
  router.Post(instance + "/backups", Route(&BackupApi::CreateBackup));
  router.Get(instance + "/backups", Route(&BackupApi::ListBackups));
  router.Get(instance + "/backups/{backup}", Route(&BackupApi::GetBackup));
  router.Delete(instance + "/backups/{backup}", Route(&BackupApi::DeleteBackup));
  router.Post(instance + "/backups/{backup}/restore", Route(&BackupApi::CreateRestore));
  router.Get(instance + "/restores", Route(&BackupApi::ListRestores));
  router.Get(instance + "/restores/{restore}", Route(&BackupApi::GetRestore));
  router.Get(instance + "/config", Route(&BackupApi::GetConfig));
  router.Put(instance, Route(&BackupApi::PutConfig));
}

http::Response BackupApi::Healthy(http::Request&, const http::PathParams&, const std::string&) {
  return JsonResponse(200, {{"message", "healthy"}});
}

http::Response BackupApi::CreateBackup(http::Request&, const http::PathParams& p,
                                       const std::string& type) {
  std::string id(p.Get("instance"));
  RegistryResult result = registry_.CreateBackup(type, id);
  if (result.outcome != Outcome::kAccepted) return BackupFailure(result, id);
  return JsonResponse(201,
                      {{"id", result.id}, {"message", "job to back up the instance is queued"}});
}

http::Response BackupApi::ListBackups(http::Request&, const http::PathParams& p,
                                      const std::string& type) {
  auto view = registry_.Get(type, p.Get("instance"));
  if (!view) return NoSuchInstance(p.Get("instance"));
  Json list = Json::array();
  for (const auto& b : view->record.backups) list.push_back(BackupJson(b));
  return JsonResponse(200, list);
}

http::Response BackupApi::GetBackup(http::Request&, const http::PathParams& p,
                                    const std::string& type) {
  auto view = registry_.Get(type, p.Get("instance"));
  if (!view) return NoSuchInstance(p.Get("instance"));
  auto bid = PositiveId(p, "backup");
  if (!bid) return ErrorResponse(400, "", "backup_id must be a positive integer");
  for (const auto& b : view->record.backups) {
    if (b.id == *bid) return JsonResponse(200, BackupJson(b));
  }
  return ErrorResponse(404, "NotFound", fmt::format("backup {} not found", *bid));
}

http::Response BackupApi::DeleteBackup(http::Request&, const http::PathParams& p,
                                       const std::string& type) {
  std::string id(p.Get("instance"));
  if (!registry_.Get(type, id)) return NoSuchInstance(id);
  auto bid = PositiveId(p, "backup");
  if (!bid) return ErrorResponse(400, "", "backup_id must be a positive integer");
  RegistryResult result = registry_.DeleteBackup(type, id, *bid);
  if (result.outcome != Outcome::kDone) return BackupFailure(result, id);
  return JsonResponse(200, {{"message", result.message}});
}

http::Response BackupApi::CreateRestore(http::Request&, const http::PathParams& p,
                                        const std::string& type) {
  std::string id(p.Get("instance"));
  if (!registry_.Get(type, id)) return NoSuchInstance(id);
  auto bid = PositiveId(p, "backup");
  if (!bid) return ErrorResponse(400, "", "backup_id must be a positive integer");
  RegistryResult result = registry_.CreateRestore(type, id, *bid);
  if (result.outcome != Outcome::kAccepted) return BackupFailure(result, id);
  return JsonResponse(202, {{"id", result.id}});
}

http::Response BackupApi::ListRestores(http::Request&, const http::PathParams& p,
                                       const std::string& type) {
  auto view = registry_.Get(type, p.Get("instance"));
  if (!view) return NoSuchInstance(p.Get("instance"));
  Json list = Json::array();
  for (const auto& x : view->record.restores) list.push_back(RestoreJson(x));
  return JsonResponse(200, list);
}

http::Response BackupApi::GetRestore(http::Request&, const http::PathParams& p,
                                     const std::string& type) {
  auto view = registry_.Get(type, p.Get("instance"));
  if (!view) return NoSuchInstance(p.Get("instance"));
  auto rid = PositiveId(p, "restore");
  if (!rid) return ErrorResponse(400, "", "restore_id must be a positive integer");
  for (const auto& x : view->record.restores) {
    if (x.id == *rid) return JsonResponse(200, RestoreJson(x));
  }
  return ErrorResponse(404, "NotFound", fmt::format("restore {} not found", *rid));
}

http::Response BackupApi::GetConfig(http::Request&, const http::PathParams& p,
                                    const std::string& type) {
  auto view = registry_.Get(type, p.Get("instance"));
  if (!view) return NoSuchInstance(p.Get("instance"));
  const BrokerOptions& options = registry_.options();
  const Json* exclude = machinery::Find(view->record.backup_config, {"exclude_from_auto_backup"});
  return JsonResponse(200,
                      {{"min_backup_count", options.min_backups},
                       {"retention_time", options.retention.count() / 24},
                       {"min_encryption_key_length", 8},
                       {"exclude_from_auto_backup", exclude != nullptr ? *exclude : Json(true)},
                       {"backup_type", "full"},
                       {"max_backup_count", options.max_backups}});
}

http::Response BackupApi::PutConfig(http::Request& r, const http::PathParams& p,
                                    const std::string& type) {
  std::string id(p.Get("instance"));
  if (!registry_.Get(type, id)) return NoSuchInstance(id);
  auto settings = ParseBackupSettings(r.body);
  if (!settings.ok()) return ErrorResponse(400, "", settings.status().message());
  RegistryResult result = registry_.ConfigureBackups(type, id, *settings);
  if (result.outcome != Outcome::kDone) return BackupFailure(result, id);
  return JsonResponse(200, {{"message", result.message}});
}

}  // namespace klutch::broker
