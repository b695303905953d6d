// Runs the HTTP cases in test/conformance/http/*.cases against a real `klutch apiserver`:
// each case is a request and the expected status code plus a JSON subset of the response.
// Format: see test/conformance/README.md.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/strings.h"
#include "machinery/json.h"
#include "test/support/kube_client.h"
#include "test/support/process.h"

namespace klutch::testing {
namespace {

namespace fs = std::filesystem;
using machinery::Json;

struct HttpCase {
  std::string name;
  int line = 0;
  std::string method, path;
  http::Headers headers;
  std::string body;
  int want_code = 0;
  std::string want_json;      // JSON subset, may be empty
  std::string want_contains;  // for non-JSON bodies
};

// Every key of `want` is in `got` with a matching value (objects recursively, arrays
// element by element with the same length).
bool Subset(const Json& want, const Json& got, std::string& where) {
  if (want.is_object()) {
    if (!got.is_object()) return false;
    for (const auto& [k, v] : want.items()) {
      if (!got.contains(k)) {
        where = k + " missing";
        return false;
      }
      if (!Subset(v, got[k], where)) {
        where = k + "." + where;
        return false;
      }
    }
    return true;
  }
  if (want.is_array()) {
    if (!got.is_array() || got.size() != want.size()) {
      where = "array length";
      return false;
    }
    for (size_t i = 0; i < want.size(); ++i) {
      if (!Subset(want[i], got[i], where)) {
        where = "[" + std::to_string(i) + "]" + where;
        return false;
      }
    }
    return true;
  }
  if (want != got) where = "value " + got.dump() + " != " + want.dump();
  return want == got;
}

std::vector<HttpCase> Parse(const fs::path& file) {
  std::ifstream in(file);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  std::vector<HttpCase> out;
  size_t i = 0;
  while (i < lines.size()) {
    if (!lines[i].starts_with("### ")) {
      ++i;
      continue;
    }
    HttpCase c;
    c.name = lines[i].substr(4);
    c.line = static_cast<int>(i + 1);
    ++i;
    auto sp = lines[i].find(' ');
    c.method = lines[i].substr(0, sp);
    c.path = lines[i].substr(sp + 1);
    ++i;
    for (; i < lines.size() && !lines[i].empty() && !lines[i].starts_with("--- "); ++i) {
      auto colon = lines[i].find(':');
      c.headers.Add(lines[i].substr(0, colon), std::string(core::Trim(lines[i].substr(colon + 1))));
    }
    if (i < lines.size() && lines[i].empty()) ++i;
    std::string body;
    for (; i < lines.size() && !lines[i].starts_with("--- "); ++i) {
      if (lines[i].starts_with("@bytes ")) {
        // A ConfigMap whose data is this many bytes: for the request size limit.
        size_t n = std::stoul(lines[i].substr(7));
        body += Json{{"apiVersion", "v1"},
                     {"kind", "ConfigMap"},
                     {"metadata", {{"name", "big"}}},
                     {"data", {{"blob", std::string(n, 'x')}}}}
                    .dump();
      } else if (lines[i].starts_with("@hex ")) {
        std::string hex = lines[i].substr(5);
        for (size_t k = 0; k + 1 < hex.size(); k += 2) {
          body += static_cast<char>(std::stoi(hex.substr(k, 2), nullptr, 16));
        }
      } else {
        body += lines[i] + "\n";
      }
    }
    c.body = body;
    if (i < lines.size()) {
      std::string expect = lines[i].substr(4);
      auto sp2 = expect.find(' ');
      c.want_code = std::stoi(expect.substr(0, sp2));
      if (sp2 != std::string::npos) c.want_contains = expect.substr(sp2 + 1);
      ++i;
    }
    for (; i < lines.size() && !lines[i].starts_with("### "); ++i) c.want_json += lines[i] + "\n";
    out.push_back(std::move(c));
  }
  return out;
}

class HttpCases : public ::testing::TestWithParam<std::string> {};

TEST_P(HttpCases, RespondAsKubeApiserver) {
  fs::path file = fs::path(KLUTCH_SOURCE_DIR) / "test/conformance/http" / (GetParam() + ".cases");
  auto cases = Parse(file);
  ASSERT_FALSE(cases.empty());
  TempDir dir("klutch-http-cases");
  std::string error;
  auto server = ApiServerProcess::Start(dir.path() / "data", {}, &error);
  ASSERT_TRUE(server) << error;
  auto creds = ReadKubeconfig(server->kubeconfig());
  ASSERT_TRUE(creds.ok());
  auto client = NewClient(*creds);
  for (const auto& c : cases) {
    SCOPED_TRACE(file.filename().string() + ":" + std::to_string(c.line) + " " + c.name);
    http::Headers h = c.headers;
    if (!h.Has("Accept")) h.Set("Accept", "application/json");
    if (!c.body.empty() && !h.Has("Content-Type")) h.Set("Content-Type", "application/json");
    auto r = client->Do(c.method, c.path, h, c.body);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->status, c.want_code) << r->body.substr(0, 2000);
    if (!c.want_contains.empty()) {
      EXPECT_NE(r->body.find(c.want_contains), std::string::npos) << r->body.substr(0, 2000);
    }
    if (!core::Trim(c.want_json).empty()) {
      auto want = machinery::ParseJson(c.want_json);
      ASSERT_TRUE(want.ok()) << "bad expectation JSON: " << want.status().ToString();
      auto got = machinery::ParseJson(r->body);
      ASSERT_TRUE(got.ok()) << "response is not JSON: " << r->body.substr(0, 500);
      std::string where;
      EXPECT_TRUE(Subset(*want, *got, where)) << where << "\ngot: " << r->body.substr(0, 2000);
    }
    if (::testing::Test::HasFailure()) break;
  }
}

std::vector<std::string> Files() {
  std::vector<std::string> out;
  for (const auto& e :
       fs::directory_iterator(fs::path(KLUTCH_SOURCE_DIR) / "test/conformance/http")) {
    if (e.path().extension() == ".cases") out.push_back(e.path().stem().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

INSTANTIATE_TEST_SUITE_P(Files, HttpCases, ::testing::ValuesIn(Files()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string n = info.param;
                           for (auto& ch : n) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return n;
                         });

}  // namespace
}  // namespace klutch::testing
