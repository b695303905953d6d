// The broker against the Open Service Broker API's MUST statements (spec 2.11-2.17 and
// ../shared/conformance/osbapi/openapi.yaml), as tables of cases: a request and the status and
// body fields the spec requires. Each case is named after the statement it checks. Most need
// no server (requests refused before anything is created); one table runs against a real
// instance and binding of every service the broker runs. Also: the broker's /metrics needs its
// credentials.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <optional>

#include "broker/broker.h"
#include "core/file.h"
#include "core/process.h"
#include "core/random.h"
#include "core/strings.h"
#include "http/client.h"
#include "http/server.h"
#include "machinery/json.h"
#include "machinery/object.h"
#include "test/support/served_broker.h"
#include "test/support/wait.h"

namespace klutch::broker {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;

constexpr char kPg[] = "klutch-a9s-postgresql15";
constexpr char kPgNano[] = "klutch-postgresql-single-nano";
constexpr char kKv[] = "klutch-a9s-keyvalue8";
constexpr char kKvNano[] = "klutch-keyvalue-single-nano-ssl";

// A body field the response must have: `value` null means "present, any value".
struct Field {
  std::string pointer;  // JSON pointer; "" = the whole body
  Json value;
};

struct Case {
  std::string must;  // the statement checked
  std::string method;
  std::string target;  // below /<base>
  Json body;           // null: no body; a string: sent as it is
  int status;
  std::vector<Field> fields = {};
  std::string description_mentions = {};
  std::string base = "postgresql";
  bool auth = true;
  std::string version = "2.14";  // "" = no X-Broker-API-Version header
};

Json Provision(const std::string& service, const std::string& plan, Json parameters = nullptr) {
  Json body = {{"service_id", service},
               {"plan_id", plan},
               {"organization_guid", "org-1"},
               {"space_guid", "space-1"}};
  if (!parameters.is_null()) body["parameters"] = std::move(parameters);
  return body;
}

Json Without(Json body, const std::string& key) {
  body.erase(key);
  return body;
}

Json With(Json body, const std::string& key, Json value) {
  body[key] = std::move(value);
  return body;
}

class Harness {
 public:
  explicit Harness(fs::path dir) : served_(BrokerOptions{.state_dir = std::move(dir)}, 4) {}

  http::ClientResponse Do(const std::string& method, const std::string& path,
                          const std::optional<BasicCredentials>& auth, const std::string& version,
                          std::string body) {
    return served_.Request(method, path, auth, version, std::move(body));
  }

  http::ClientResponse Call(const std::string& base, const std::string& method,
                            const std::string& target, const Json& body = nullptr) {
    return Do(method, "/" + base + target, broker().Credentials(base), "2.14",
              body.is_null() ? "" : machinery::Dump(body));
  }

  void Run(const Case& c) {
    SCOPED_TRACE(c.must);
    std::string body = c.body.is_null()     ? ""
                       : c.body.is_string() ? c.body.get<std::string>()
                                            : machinery::Dump(c.body);
    std::optional<BasicCredentials> auth;
    if (c.auth) auth = broker().Credentials(c.base);
    auto r = Do(c.method, "/" + c.base + c.target, auth, c.version, body);
    EXPECT_EQ(r.status, c.status) << c.method << " " << c.target << ": " << r.body;
    auto json = machinery::ParseJson(r.body);
    ASSERT_TRUE(json.ok()) << "the body is not JSON: " << r.body;
    ASSERT_TRUE(json->is_object()) << r.body;
    if (r.status >= 400 && r.status != 410) {
      // Errors: a JSON object with a description saying what to fix.
      EXPECT_FALSE(machinery::GetString(*json, {"description"}).empty()) << r.body;
    }
    for (const Field& f : c.fields) {
      Json::json_pointer pointer(f.pointer);
      ASSERT_TRUE(json->contains(pointer)) << f.pointer << " missing in " << r.body;
      if (!f.value.is_null()) {
        EXPECT_EQ(json->at(pointer), f.value) << f.pointer << " in " << r.body;
      }
    }
    if (!c.description_mentions.empty()) {
      std::string description = machinery::GetString(*json, {"description"});
      EXPECT_NE(description.find(c.description_mentions), std::string::npos) << description;
    }
  }

  Broker& broker() { return served_.broker(); }
  uint16_t port() const { return served_.port(); }

 private:
  ServedBroker served_;
};

TEST(OsbConformanceTest, RequestsThatMustBeRefusedCreateNothing) {
  fs::path dir = NewStateDir("kbc");
  {
    Harness h(dir);
    const Json pg = Provision(kPg, kPgNano);
    const std::string put = "/v2/service_instances/c-1?accepts_incomplete=true";
    const std::string del_query = fmt::format("?service_id={}&plan_id={}", kPg, kPgNano);
    const Json bind = {{"service_id", kPg}, {"plan_id", kPgNano}};
    const std::vector<Case> cases = {
        // Catalog
        {"Catalog: 200 OK MUST be returned with services, each with id, name, description, "
         "bindable and plans (id, name, description)",
         "GET",
         "/v2/catalog",
         nullptr,
         200,
         {{"/services/0/id", kPg},
          {"/services/0/name", "a9s-postgresql15"},
          {"/services/0/description", nullptr},
          {"/services/0/bindable", true},
          {"/services/0/plans/0/id", nullptr},
          {"/services/0/plans/0/name", nullptr},
          {"/services/0/plans/0/description", nullptr}}},
        // Headers and authentication
        {"Version: 412 Precondition Failed MUST be returned when X-Broker-API-Version is missing",
         "GET",
         "/v2/catalog",
         nullptr,
         412,
         {{"/error", "PreconditionFailed"}},
         "",
         "postgresql",
         true,
         ""},
        {"Version: 412 Precondition Failed MUST be returned for a version the broker does not "
         "support",
         "GET",
         "/v2/catalog",
         nullptr,
         412,
         {{"/error", "PreconditionFailed"}},
         "2.17",
         "postgresql",
         true,
         "3.0"},
        {"Authentication: 401 Unauthorized MUST be returned without credentials",
         "PUT",
         put,
         pg,
         401,
         {},
         "",
         "postgresql",
         false},
        {"Authentication: a base path's credentials do not open another's",
         "GET",
         "/v2/catalog",
         nullptr,
         401,
         {},
         "",
         "keyvalue",
         false},
        // Provisioning
        {"Provisioning: 422 AsyncRequired MUST be returned without accepts_incomplete=true when "
         "the broker only provisions asynchronously",
         "PUT",
         "/v2/service_instances/c-1",
         pg,
         422,
         {{"/error", "AsyncRequired"}}},
        {"Provisioning: 422 AsyncRequired for accepts_incomplete=false",
         "PUT",
         "/v2/service_instances/c-1?accepts_incomplete=false",
         pg,
         422,
         {{"/error", "AsyncRequired"}}},
        {"Provisioning: 400 Bad Request MUST be returned for a malformed request",
         "PUT",
         put,
         "{\"service_id\":",
         400,
         {{"/error", "BadRequest"}},
         "not valid JSON"},
        {"Provisioning: 400 Bad Request for a missing service_id (required)",
         "PUT",
         put,
         Without(pg, "service_id"),
         400,
         {},
         "service_id"},
        {"Provisioning: 400 Bad Request for a missing plan_id (required)",
         "PUT",
         put,
         Without(pg, "plan_id"),
         400,
         {},
         "plan_id"},
        {"Provisioning: 400 Bad Request for a missing organization_guid (required, MUST be a "
         "non-empty string)",
         "PUT",
         put,
         Without(pg, "organization_guid"),
         400,
         {},
         "organization_guid"},
        {"Provisioning: 400 Bad Request for a missing space_guid (required, MUST be a non-empty "
         "string)",
         "PUT",
         put,
         Without(pg, "space_guid"),
         400,
         {},
         "space_guid"},
        {"Provisioning: 400 Bad Request for an empty organization_guid",
         "PUT",
         put,
         With(pg, "organization_guid", ""),
         400,
         {},
         "organization_guid"},
        {"Provisioning: 400 Bad Request for an empty space_guid",
         "PUT",
         put,
         With(pg, "space_guid", ""),
         400,
         {},
         "space_guid"},
        {"Provisioning: 400 Bad Request for a space_guid that is not a string",
         "PUT",
         put,
         With(pg, "space_guid", 7),
         400,
         {},
         "space_guid"},
        {"Provisioning: 400 Bad Request for a service_id not in the catalog",
         "PUT",
         put,
         With(pg, "service_id", "a9s-postgresql13"),
         400,
         {},
         "a9s-postgresql15"},
        {"Provisioning: 400 Bad Request for a plan_id not in the service",
         "PUT",
         put,
         With(pg, "plan_id", "nope"),
         400,
         {},
         "postgresql-single-nano"},
        {"Provisioning: 400 Bad Request for parameters that are not an object",
         "PUT",
         put,
         With(pg, "parameters", Json::array({1})),
         400,
         {},
         "parameters"},
        {"Provisioning: 400 Bad Request for a parameter PostgreSQL would refuse",
         "PUT",
         put,
         Provision(kPg, kPgNano, {{"work_mem", "9999999999TB"}}),
         400,
         {},
         "work_mem"},
        {"Provisioning: 400 Bad Request for a Redis maxmemory-policy Redis does not know (the "
         "description names the accepted ones)",
         "PUT",
         put,
         Provision(kKv, kKvNano, {{"maxmemory-policy", "lru-ish"}}),
         400,
         {},
         "noeviction",
         "keyvalue"},
        {"Provisioning: 400 Bad Request for a control byte in a KeyValue parameter",
         "PUT",
         put,
         Provision(kKv, kKvNano, {{"maxmemory-policy", std::string("noeviction\0", 11)}}),
         400,
         {},
         "maxmemory-policy",
         "keyvalue"},
        {"IDs: 400 Bad Request for instance_id \".\"",
         "PUT",
         "/v2/service_instances/.?accepts_incomplete=true",
         pg,
         400,
         {},
         "instance_id"},
        {"IDs: 400 Bad Request for instance_id \"..\" sent percent-encoded",
         "PUT",
         "/v2/service_instances/%2e%2E?accepts_incomplete=true",
         pg,
         400,
         {},
         "instance_id"},
        // Updating
        {"Updating: 422 AsyncRequired MUST be returned without accepts_incomplete=true",
         "PATCH",
         "/v2/service_instances/c-1",
         Json{{"service_id", kPg}},
         422,
         {{"/error", "AsyncRequired"}}},
        {"Updating: 400 Bad Request for a missing service_id (required)",
         "PATCH",
         put,
         Json{{"plan_id", kPgNano}},
         400,
         {},
         "service_id"},
        {"IDs: 400 Bad Request for instance_id \".\" on update",
         "PATCH",
         "/v2/service_instances/%2E?accepts_incomplete=true",
         Json{{"service_id", kPg}},
         400,
         {},
         "instance_id"},
        // Deprovisioning
        {"Deprovisioning: 400 Bad Request MUST be returned without service_id",
         "DELETE",
         "/v2/service_instances/c-1?plan_id=p&accepts_incomplete=true",
         nullptr,
         400,
         {},
         "service_id"},
        {"Deprovisioning: 400 Bad Request MUST be returned without plan_id",
         "DELETE",
         "/v2/service_instances/c-1?service_id=s&accepts_incomplete=true",
         nullptr,
         400,
         {},
         "plan_id"},
        {"Deprovisioning: 410 Gone MUST be returned with {} when the instance does not exist",
         "DELETE",
         "/v2/service_instances/c-1" + del_query + "&accepts_incomplete=true",
         nullptr,
         410,
         {{"", Json::object()}}},
        {"IDs: 400 Bad Request for instance_id \"..\" on deprovision",
         "DELETE",
         "/v2/service_instances/.." + del_query + "&accepts_incomplete=true",
         nullptr,
         400,
         {},
         "instance_id"},
        // Fetching and polling
        {"Fetching an instance: 404 Not Found MUST be returned when it does not exist", "GET",
         "/v2/service_instances/c-1", nullptr, 404},
        {"IDs: 400 Bad Request for instance_id \"%2e\" on fetch",
         "GET",
         "/v2/service_instances/%2e",
         nullptr,
         400,
         {},
         "instance_id"},
        {"Polling last_operation: 410 Gone MUST be returned when the instance is gone", "GET",
         "/v2/service_instances/c-1/last_operation", nullptr, 410},
        {"IDs: 400 Bad Request for instance_id \"..\" on last_operation",
         "GET",
         "/v2/service_instances/%2E%2E/last_operation",
         nullptr,
         400,
         {},
         "instance_id"},
        // Binding
        {"Binding: 400 Bad Request for a missing service_id (required)",
         "PUT",
         "/v2/service_instances/c-1/service_bindings/b-1",
         Json{{"plan_id", kPgNano}},
         400,
         {},
         "service_id"},
        {"Binding: 400 Bad Request for a missing plan_id (required)",
         "PUT",
         "/v2/service_instances/c-1/service_bindings/b-1",
         Json{{"service_id", kPg}},
         400,
         {},
         "plan_id"},
        {"IDs: 400 Bad Request for binding_id \"..\" on bind",
         "PUT",
         "/v2/service_instances/c-1/service_bindings/%2e%2e",
         bind,
         400,
         {},
         "binding_id"},
        {"IDs: 400 Bad Request for instance_id \".\" on bind",
         "PUT",
         "/v2/service_instances/./service_bindings/b-1",
         bind,
         400,
         {},
         "instance_id"},
        {"Fetching a binding: 404 Not Found MUST be returned when it does not exist", "GET",
         "/v2/service_instances/c-1/service_bindings/b-1", nullptr, 404},
        {"IDs: 400 Bad Request for binding_id \".\" on fetch",
         "GET",
         "/v2/service_instances/c-1/service_bindings/.",
         nullptr,
         400,
         {},
         "binding_id"},
        {"Polling a binding's last_operation: 410 Gone when it is gone", "GET",
         "/v2/service_instances/c-1/service_bindings/b-1/last_operation", nullptr, 410},
        // Unbinding
        {"Unbinding: 400 Bad Request MUST be returned without service_id and plan_id",
         "DELETE",
         "/v2/service_instances/c-1/service_bindings/b-1",
         nullptr,
         400,
         {},
         "service_id"},
        {"Unbinding: 410 Gone MUST be returned with {} when the binding does not exist",
         "DELETE",
         "/v2/service_instances/c-1/service_bindings/b-1" + del_query,
         nullptr,
         410,
         {{"", Json::object()}}},
        {"IDs: 400 Bad Request for binding_id \"..\" on unbind",
         "DELETE",
         "/v2/service_instances/c-1/service_bindings/.." + del_query,
         nullptr,
         400,
         {},
         "binding_id"},
        // The a9s extension and the backup manager take the same IDs.
        {"IDs: 400 Bad Request for instance_id \"..\" on the a9s instance document",
         "GET",
         "/instances/%2e%2e",
         nullptr,
         400,
         {},
         "instance_id",
         "postgresql",
         true,
         ""},
        {"IDs: 400 Bad Request for instance_id \"..\" on the backup manager",
         "POST",
         "/instances/../backups",
         nullptr,
         400,
         {},
         "instance_id",
         "postgresql-backup-manager",
         true,
         ""},
    };
    for (const Case& c : cases) h.Run(c);
    // None of that created an instance.
    auto list = machinery::ParseJson(h.Call("postgresql", "GET", "/instances").body);
    ASSERT_TRUE(list.ok());
    EXPECT_EQ((*list)["total_results"], 0);
    EXPECT_TRUE(fs::is_empty(dir / "i"));
  }
  fs::remove_all(dir);
}

// One service's plans, parameters and credentials for the table below.
struct Contract {
  std::string base, service, plan;
  std::string other_plan;   // another plan of the service (a conflicting provision)
  std::string update_plan;  // the plan an update moves to; "" when plans never change
  Json parameters, other_parameters;
  Json refused_parameters;  // parameters the server would refuse
  std::string refused_names;
  std::string credential;     // a JSON pointer into every binding's credentials
  std::string other_service;  // another service's ID (a conflicting bind)
};

void CheckContract(const Contract& s) {
  fs::path dir = NewStateDir("kbc");
  {
    Harness h(dir);
    const std::string id = "c-" + s.base + "-" + core::RandomSuffix(6);
    const std::string instance = "/v2/service_instances/" + id;
    const Json provision = Provision(s.service, s.plan, s.parameters);
    auto created = h.Call(s.base, "PUT", instance + "?accepts_incomplete=true", provision);
    ASSERT_EQ(created.status, 202) << created.body;
    auto op = machinery::GetString(*machinery::ParseJson(created.body), {"operation"});
    // While an operation runs (initdb and a first start take far longer than these requests;
    // checked before and after), fetching the instance answers as the spec says.
    auto in_progress = [&] {
      auto r = h.Call(s.base, "GET", instance + "/last_operation");
      return machinery::GetString(*machinery::ParseJson(r.body), {"state"}) == "in progress";
    };
    auto fetch_while_running = [&](int want, const std::string& error) {
      bool before = in_progress();
      auto fetched = h.Call(s.base, "GET", instance);
      if (!before || !in_progress()) return;  // finished in between: nothing to check
      EXPECT_EQ(fetched.status, want) << fetched.body;
      EXPECT_EQ(machinery::GetString(*machinery::ParseJson(fetched.body), {"error"}), error);
    };
    {
      SCOPED_TRACE(
          "Fetching an instance: 404 Not Found MUST be returned while its provision is in "
          "progress");
      fetch_while_running(404, "NotFound");
    }
    std::string state;
    ASSERT_TRUE(testing::Eventually(
        [&] {
          auto r = h.Call(s.base, "GET", instance + "/last_operation?operation=" + op);
          state = machinery::GetString(*machinery::ParseJson(r.body), {"state"});
          return state != "in progress";
        },
        seconds(180)));
    ASSERT_EQ(state, "succeeded");
    const Json bind = {
        {"service_id", s.service}, {"plan_id", s.plan}, {"parameters", {{"app", "a"}}}};
    auto bound = h.Call(s.base, "PUT", instance + "/service_bindings/b-1", bind);
    ASSERT_EQ(bound.status, 201) << bound.body;

    const std::string put = instance + "?accepts_incomplete=true";
    const std::string del_query = fmt::format("?service_id={}&plan_id={}", s.service, s.plan);
    const std::vector<Case> cases = {
        {"Provisioning: 409 Conflict MUST be returned for the same instance_id with another plan",
         "PUT", put, With(provision, "plan_id", s.other_plan), 409},
        {"Provisioning: 409 Conflict MUST be returned for the same instance_id with other "
         "parameters",
         "PUT", put, With(provision, "parameters", s.other_parameters), 409},
        {"Provisioning: 409 Conflict MUST be returned for the same instance_id in another "
         "organization",
         "PUT", put, With(provision, "organization_guid", "org-2"), 409},
        {"Provisioning: 200 OK SHOULD be returned for an identical request on a provisioned "
         "instance",
         "PUT",
         put,
         provision,
         200,
         {{"", Json::object()}}},
        {"Fetching an instance: 200 OK MUST be returned with service_id, plan_id and parameters",
         "GET",
         instance,
         nullptr,
         200,
         {{"/service_id", s.service}, {"/plan_id", s.plan}, {"/parameters", s.parameters}}},
        {"Polling last_operation: 200 OK MUST be returned with the state",
         "GET",
         instance + "/last_operation",
         nullptr,
         200,
         {{"/state", "succeeded"}}},
        {"Polling last_operation: 400 Bad Request for an operation the instance never had", "GET",
         instance + "/last_operation?operation=nope", nullptr, 400},
        {"Updating: 200 OK MUST be returned when the requested changes are in effect (nothing "
         "to change)",
         "PATCH",
         put,
         Json{{"service_id", s.service}, {"parameters", s.parameters}},
         200,
         {{"", Json::object()}}},
        {"Updating: 400 Bad Request for a parameter the server would refuse (nothing changes)",
         "PATCH",
         put,
         Json{{"service_id", s.service}, {"parameters", s.refused_parameters}},
         400,
         {},
         s.refused_names},
        {"Updating: 400 Bad Request for a plan_id not in the service",
         "PATCH",
         put,
         Json{{"service_id", s.service}, {"plan_id", "nope"}},
         400,
         {},
         s.plan.substr(7)},
        {"Binding: 200 OK MUST be returned for an identical request on an existing binding",
         "PUT",
         instance + "/service_bindings/b-1",
         bind,
         200,
         {{s.credential, nullptr}}},
        {"Binding: 409 Conflict MUST be returned for the same binding_id with other parameters",
         "PUT",
         instance + "/service_bindings/b-1",
         With(bind, "parameters", {{"app", "b"}}),
         409,
         {},
         "b-1"},
        {"Binding: 409 Conflict MUST be returned for the same binding_id without its parameters",
         "PUT", instance + "/service_bindings/b-1", Without(bind, "parameters"), 409},
        {"Binding: 409 Conflict MUST be returned for the same binding_id with another plan_id",
         "PUT", instance + "/service_bindings/b-1", With(bind, "plan_id", s.other_plan), 409},
        {"Binding: 409 Conflict MUST be returned for the same binding_id with another service_id",
         "PUT", instance + "/service_bindings/b-1", With(bind, "service_id", s.other_service), 409},
        {"Binding: 201 Created MUST be returned for a new binding",
         "PUT",
         instance + "/service_bindings/b-2",
         bind,
         201,
         {{s.credential, nullptr}}},
        {"Fetching a binding: 200 OK MUST be returned with its credentials",
         "GET",
         instance + "/service_bindings/b-2",
         nullptr,
         200,
         {{s.credential, nullptr}}},
        {"Fetching a binding: 404 Not Found MUST be returned when it does not exist", "GET",
         instance + "/service_bindings/b-3", nullptr, 404},
        {"Unbinding: 200 OK MUST be returned with {} when the binding was deleted",
         "DELETE",
         instance + "/service_bindings/b-2" + del_query,
         nullptr,
         200,
         {{"", Json::object()}}},
        {"Unbinding: 410 Gone MUST be returned when the binding is already gone", "DELETE",
         instance + "/service_bindings/b-2" + del_query, nullptr, 410},
        {"Binding: the ID of a deleted binding may be used again (201 Created)", "PUT",
         instance + "/service_bindings/b-2", With(bind, "parameters", {{"app", "c"}}), 201},
    };
    for (Case c : cases) {
      c.base = s.base;
      h.Run(c);
    }

    // After an update (of the plan where plans change), a repeated bind may name the binding's
    // plan or the instance's new one; both are the same binding.
    const std::string small = s.update_plan;
    auto update =
        h.Call(s.base, "PATCH", put,
               small.empty() ? Json{{"service_id", s.service}, {"parameters", s.other_parameters}}
                             : Json{{"service_id", s.service}, {"plan_id", small}});
    ASSERT_EQ(update.status, 202) << update.body;
    {
      SCOPED_TRACE(
          "Fetching an instance: 422 ConcurrencyError MUST be returned while it is being "
          "updated");
      fetch_while_running(422, "ConcurrencyError");
    }
    ASSERT_TRUE(testing::Eventually(
        [&] {
          auto r = h.Call(s.base, "GET", instance + "/last_operation");
          state = machinery::GetString(*machinery::ParseJson(r.body), {"state"});
          return state != "in progress";
        },
        seconds(180)));
    ASSERT_EQ(state, "succeeded");
    const std::vector<Case> after_update = {
        {"Binding: 200 OK MUST be returned for an identical request (the binding's plan)", "PUT",
         instance + "/service_bindings/b-1", bind, 200},
        {"Binding: 200 OK MUST be returned for an identical request (the instance's plan now)",
         "PUT", instance + "/service_bindings/b-1",
         With(bind, "plan_id", small.empty() ? s.plan : small), 200},
        {"Deprovisioning: 202 Accepted MUST be returned with an operation when deleting "
         "asynchronously",
         "DELETE",
         instance + del_query + "&accepts_incomplete=true",
         nullptr,
         202,
         {{"/operation", nullptr}}},
    };
    for (Case c : after_update) {
      c.base = s.base;
      h.Run(c);
    }
    EXPECT_TRUE(testing::Eventually(
        [&] { return h.Call(s.base, "GET", instance + "/last_operation").status == 410; },
        seconds(60)));
  }
  fs::remove_all(dir);
}

TEST(OsbConformanceTest, RequestsOnAnExistingInstanceAndBindingOfEveryService) {
  CheckContract({.base = "postgresql",
                 .service = kPg,
                 .plan = kPgNano,
                 .other_plan = "klutch-postgresql-single-small",
                 .update_plan = "klutch-postgresql-single-small",
                 .parameters = {{"statement_timeout", 1000}},
                 .other_parameters = {{"statement_timeout", 2000}},
                 .refused_parameters = {{"work_mem", "9999999999TB"}},
                 .refused_names = "work_mem",
                 .credential = "/credentials/uri",
                 .other_service = kKv});
  CheckContract({.base = "keyvalue",
                 .service = kKv,
                 .plan = kKvNano,
                 .other_plan = "klutch-keyvalue-single-small-ssl",
                 .update_plan = "klutch-keyvalue-single-small-ssl",
                 .parameters = {{"maxmemory-policy", "allkeys-lru"}},
                 .other_parameters = {{"maxmemory-policy", "noeviction"}},
                 .refused_parameters = {{"maxmemory-samples", 65}},
                 .refused_names = "maxmemory-samples",
                 .credential = "/credentials/valkey/username",
                 .other_service = kPg});
  CheckContract({.base = "mariadb",
                 .service = "klutch-a9s-mariadb106",
                 .plan = "klutch-mariadb-single-nano",
                 .other_plan = "klutch-mariadb-single-small",
                 .update_plan = "klutch-mariadb-cluster-small",
                 .parameters = {{"binlog_expire_days", 2}},
                 .other_parameters = {{"binlog_expire_days", 3}},
                 .refused_parameters = {{"binlog_expire_days", 100}},
                 .refused_names = "binlog_expire_days",
                 .credential = "/credentials/uri",
                 .other_service = kPg});
  CheckContract({.base = "prometheus",
                 .service = "klutch-a9s-prometheus",
                 .plan = "klutch-prometheus-single-small",
                 .other_plan = "klutch-prometheus-single-big",
                 .update_plan = "",
                 .parameters = {{"mapping_strict_match", true}},
                 .other_parameters = {{"mapping_strict_match", false}},
                 .refused_parameters =
                     {{"scrape_configs",
                       {{{"job_name", "x"}, {"scrape_interval", "1s"}, {"scrape_timeout", "2s"}}}}},
                 .refused_names = "scrape timeout greater than scrape interval",
                 .credential = "/credentials/prometheus_urls",
                 .other_service = kPg});
  CheckContract({.base = "messaging",
                 .service = "klutch-a9s-messaging4",
                 .plan = "klutch-messaging-single-nano",
                 .other_plan = "klutch-messaging-single-small",
                 .update_plan = "klutch-messaging-single-small",
                 .parameters = {{"consumer_timeout", 1800000}},
                 .other_parameters = {{"consumer_timeout", 1900000}},
                 .refused_parameters = {{"consumer_timeout", 5}},
                 .refused_names = "consumer_timeout",
                 .credential = "/credentials/http_api_uri",
                 .other_service = kPg});
}

// /metrics tells how many instances of each service exist: it needs any of the broker's
// credentials. /healthz stays open for probes.
TEST(BrokerMetricsTest, MetricsNeedTheBrokersCredentialsHealthzDoesNot) {
  fs::path dir = NewStateDir("kbc");
  {
    Harness h(dir);
    auto anonymous = h.Do("GET", "/metrics", std::nullopt, "", "");
    EXPECT_EQ(anonymous.status, 401) << anonymous.body;
    EXPECT_EQ(anonymous.body.find("klutch_broker_instances"), std::string::npos);
    EXPECT_FALSE(anonymous.headers.Get("WWW-Authenticate").empty());
    auto wrong = h.Do("GET", "/metrics", BasicCredentials{"keyvalue", "guess"}, "", "");
    EXPECT_EQ(wrong.status, 401);
    for (const std::string& base : h.broker().Bases()) {
      auto r = h.Do("GET", "/metrics", h.broker().Credentials(base), "", "");
      EXPECT_EQ(r.status, 200) << base << ": " << r.body;
      EXPECT_NE(r.body.find("klutch_broker_instances"), std::string::npos) << base;
    }
    EXPECT_EQ(h.Do("GET", "/healthz", std::nullopt, "", "").status, 200);
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace klutch::broker
