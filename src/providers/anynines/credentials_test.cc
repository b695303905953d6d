#include "providers/anynines/credentials.h"

#include <gtest/gtest.h>

#include <set>

#include "test/support/json_text.h"

namespace klutch::providers::anynines::credentials_test {
namespace {

std::set<std::string> Keys(const SecretData& data) {
  std::set<std::string> out;
  for (const auto& [k, v] : data) out.insert(k);
  return out;
}

using fixture::J;

// §5.4's expected key sets, from credentials shaped as the a9s brokers send them.
TEST(FlattenCredentials, GivesUpstreamKeySetsForEveryService) {
  struct Case {
    std::string service;
    std::string credentials;
    std::set<std::string> keys;
  };
  const std::vector<Case> cases = {
      {"postgresql",
       R"({"host":"pg.svc","hosts":["pg.svc"],"name":"d1","password":"pw","port":5432,
           "uri":"postgres://u:pw@pg.svc:5432/d1","username":"u"})",
       {"host", "hosts", "name", "password", "port", "uri", "username"}},
      {"mariadb",
       R"({"cacrt":"-----BEGIN","host":"m.svc","hosts":["m.svc"],"name":"d","password":"pw",
           "port":3306,"uri":"mysql://u:pw@m.svc:3306/d","username":"u"})",
       {"cacrt", "host", "hosts", "name", "password", "port", "uri", "username"}},
      {"keyvalue",
       R"({"cacrt":"ca","host":"kv.svc","hosts":["kv.svc"],"load_balanced_host":"lb.svc",
           "password":"pw","port":6379,"username":"u",
           "valkey":{"password":"pw","port":6379,"username":"u"}})",
       {"cacrt", "host", "hosts", "load_balanced_host", "valkey.password", "valkey.port",
        "valkey.username"}},
      {"logme2",
       R"({"cacrt":"ca","host":"https://l.svc:9200","password":"pw",
           "syslog_drain_url":"syslog-tls://l.svc:6514","username":"u"})",
       {"cacrt", "host", "password", "syslog_drain_url", "username"}},
      {"mongodb",
       R"({"default_database":"d","hosts":["mo.svc:27017"],"password":"pw",
           "uri":"mongodb://u:pw@mo.svc:27017/d?ssl=true","username":"u"})",
       {"default_database", "hosts", "password", "uri", "username"}},
      {"search",
       R"({"cacrt":"ca","host":["https://s.svc:9200"],"hosts":["https://s.svc:9200"],
           "password":"pw","port":9200,"scheme":"https","username":"u"})",
       {"cacrt", "host", "hosts", "password", "port", "scheme", "username"}},
      {"prometheus",
       R"({"alertmanager_urls":["http://p.svc:9093"],"grafana_urls":["http://p.svc:3000"],
           "graphite_exporter_port":9109,"graphite_exporters":["p.svc"],"password":"pw",
           "prometheus_urls":["http://p.svc:9090/"],"username":"u"})",
       {"alertmanager_urls", "grafana_urls", "graphite_exporter_port", "graphite_exporters",
        "password", "prometheus_urls", "username"}},
      {"messaging",
       R"({"http_api_uri":"https://u:pw@r.svc:15672/api/","http_api_uris":["https://u:pw@r.svc:15672/api/"],
           "password":"pw","username":"u","port":5671,
           "protocols":{
             "amqp_ssl":{"host":"r.svc","hosts":["r.svc"],"password":"pw","port":5671,"ssl":true,
                         "uri":"amqps://u:pw@r.svc:5671","username":"u"},
             "management":{"cacrt":"ca","host":"r.svc","hosts":["r.svc"],"password":"pw",
                           "path":"/api/","port":15672,"ssl":true,
                           "uri":"https://u:pw@r.svc:15672/api/",
                           "uris":["https://u:pw@r.svc:15672/api/"],"username":"u"}}})",
       {"http_api_uri", "http_api_uris", "protocols.amqp_ssl.host", "protocols.amqp_ssl.hosts",
        "protocols.amqp_ssl.password", "protocols.amqp_ssl.port", "protocols.amqp_ssl.ssl",
        "protocols.amqp_ssl.uri", "protocols.amqp_ssl.username", "protocols.management.cacrt",
        "protocols.management.host", "protocols.management.hosts", "protocols.management.password",
        "protocols.management.path", "protocols.management.port", "protocols.management.ssl",
        "protocols.management.uri", "protocols.management.uris", "protocols.management.username"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.service);
    EXPECT_EQ(Keys(FlattenCredentials(J(c.credentials))), c.keys);
  }
  EXPECT_EQ(cases.back().keys.size(), 19u);
}

TEST(FlattenCredentials, RendersValuesAsGoFmtSprintOfDecodedJson) {
  SecretData d = FlattenCredentials(J(R"({
    "port": 5432, "million": 1000000, "big": 123456789, "half": 0.5, "float_port": 5432.0,
    "yes": true, "no": false, "nothing": null, "text": "a b",
    "hosts": ["h1:9200", "h2:9200"], "mixed": [1, "a", 2000000, true, null],
    "objects": [{"b": 2, "a": "x"}], "empty_list": [], "nested_list": [[1, 2], ["x"]]})"));
  EXPECT_EQ(d["port"], "5432");
  EXPECT_EQ(d["million"], "1e+06");
  EXPECT_EQ(d["big"], "1.23456789e+08");
  EXPECT_EQ(d["half"], "0.5");
  EXPECT_EQ(d["float_port"], "5432");
  EXPECT_EQ(d["yes"], "true");
  EXPECT_EQ(d["no"], "false");
  EXPECT_EQ(d["nothing"], "<nil>");
  EXPECT_EQ(d["text"], "a b");
  EXPECT_EQ(d["hosts"], "[h1:9200 h2:9200]");
  EXPECT_EQ(d["mixed"], "[1 a 2e+06 true <nil>]");
  EXPECT_EQ(d["objects"], "[map[a:x b:2]]");
  EXPECT_EQ(d["empty_list"], "[]");
  EXPECT_EQ(d["nested_list"], "[[1 2] [x]]");
}

TEST(FlattenCredentials, FlattensNestedObjectsAndSanitizesEachSegment) {
  SecretData d = FlattenCredentials(J(R"({
    "protocols": {"amqp+ssl": {"uri": "amqps://h", "deep": {"x y": 1}}},
    "weird key/ü": "v", "ok-._Key9": "w", "empty": {}})"));
  EXPECT_EQ(Keys(d), (std::set<std::string>{"protocols.amqp_ssl.uri", "protocols.amqp_ssl.deep.x_y",
                                            "weird_key__", "ok-._Key9"}));
  EXPECT_EQ(d["protocols.amqp_ssl.uri"], "amqps://h");
  EXPECT_EQ(d["protocols.amqp_ssl.deep.x_y"], "1");
}

TEST(FlattenCredentials, DropsTopLevelKeyOnlyWhenANestedOneHasTheSameValue) {
  SecretData d = FlattenCredentials(J(R"({
    "password": "same", "port": 6379, "username": "top",
    "valkey": {"password": "same", "port": 6379, "username": "nested"},
    "a": {"b": {"port": 6379}}})"));
  // password and port: identical nested values -> the top-level copies go; username differs.
  EXPECT_EQ(Keys(d), (std::set<std::string>{"username", "valkey.password", "valkey.port",
                                            "valkey.username", "a.b.port"}));
  EXPECT_EQ(d["username"], "top");
}

TEST(FlattenCredentials, NonObjectGivesNothing) {
  EXPECT_TRUE(FlattenCredentials(Json()).empty());
  EXPECT_TRUE(FlattenCredentials(J("[1,2]")).empty());
  EXPECT_TRUE(FlattenCredentials(J(R"("x")")).empty());
}

Json Entry(const std::string& host, const std::string& port, const std::string& label) {
  return Json{{"hostURL", host}, {"port", port}, {"label", label}};
}

TEST(ParseConnectionDetails, ParsesEveryServiceType) {
  struct Case {
    std::string type;
    SecretData data;
    Json want;
  };
  const std::vector<Case> cases = {
      {"postgresql",
       {{"host", "pg.svc"}, {"port", "5432"}},
       Json::array({Entry("pg.svc", "5432", "SQL")})},
      {"mariadb",
       {{"host", "m.svc"}, {"port", "3306"}},
       Json::array({Entry("m.svc", "3306", "SQL")})},
      {"keyvalue",
       {{"host", "kv.svc"}, {"valkey.port", "6379"}},
       Json::array({Entry("kv.svc", "6379", "KeyValue")})},
      {"search",
       {{"host", "[https://s.svc:9200]"}},
       Json::array({Entry("https://s.svc", "9200", "Search")})},
      {"logme2",
       {{"host", "https://l.svc:9200"}},
       Json::array({Entry("https://l.svc", "9200", "Logme2")})},
      {"mongodb",
       {{"hosts", "[mo1.svc:27017 mo2.svc:27018]"}},
       Json::array({Entry("mo1.svc", "27017", "MongoDB"), Entry("mo2.svc", "27018", "MongoDB")})},
      {"prometheus",
       {{"prometheus_urls", "[http://p.svc:9090/graph]"},
        {"alertmanager_urls", "[http://p.svc:9093]"},
        {"grafana_urls", "[https://admin:pw@p.svc:3000]"},
        {"graphite_exporters", "[p.svc]"},
        {"graphite_exporter_port", "9109"}},
       Json::array({Entry("http://p.svc", "9090", "Prometheus"),
                    Entry("http://p.svc", "9093", "Alertmanager"),
                    Entry("https://p.svc", "3000", "Grafana"),
                    Entry("p.svc", "9109", "Graphite Exporter")})},
      {"messaging",
       {{"http_api_uri", "https://u:pw@r.svc:15672/api/"},
        {"protocols.amqp_ssl.uri", "amqps://u:pw@r.svc:5671"}},
       Json::array({Entry("https://r.svc", "15672", "HTTP API"),
                    Entry("amqps://r.svc", "5671", "AMQP SSL")})},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.type);
    auto got = ParseConnectionDetails(c.type, c.data);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(*got, c.want) << got->dump();
  }
}

TEST(ParseConnectionDetails, MatchesTypeBySubstringInUpstreamOrder) {
  // "search" is checked before "postgresql": a type naming both parses as search.
  auto got = ParseConnectionDetails("a9s-search-postgresql", {{"host", "[https://h:1]"}});
  ASSERT_TRUE(got.ok());
  EXPECT_EQ((*got)[0]["label"], "Search");
  got = ParseConnectionDetails("a9s-postgresql15", {{"host", "h"}, {"port", "1"}});
  ASSERT_TRUE(got.ok());
  EXPECT_EQ((*got)[0]["label"], "SQL");
}

TEST(ParseConnectionDetails, ReportsMissingAndMalformedFields) {
  auto r = ParseConnectionDetails("postgresql", {{"port", "5432"}});
  EXPECT_EQ(r.status().message(), "\"host\" field not found in secret");
  r = ParseConnectionDetails("keyvalue", {{"host", "h"}});
  EXPECT_EQ(r.status().message(), "\"valkey.port\" field not found in secret");
  r = ParseConnectionDetails("search", {{"host", "https://h:9200"}});
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not a list"), std::string::npos);
  r = ParseConnectionDetails("logme2", {{"host", "no-scheme"}});
  EXPECT_FALSE(r.ok());
  r = ParseConnectionDetails("redis", {{"host", "h"}});
  EXPECT_EQ(r.status().message(), "referenced data service not found.");
  // Messaging keys are each optional.
  auto none = ParseConnectionDetails("messaging", {});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

}  // namespace
}  // namespace klutch::providers::anynines::credentials_test
