// The browser of the e2e tests (test/support/browser.h) against a real login page: headless
// Chromium logs in through glewlwyd's own web form (OidcProvider with serve_webapp) for an
// authorization request of the provider's client, and ends at the client's redirect URI with
// a code the token endpoint accepts. Screenshots go to TestArtifactsDir().
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "core/random.h"
#include "core/strings.h"
#include "http/message.h"
#include "machinery/json.h"
#include "test/support/browser.h"
#include "test/support/oidc_provider.h"
#include "test/support/process.h"

namespace klutch::testing {
namespace {

namespace fs = std::filesystem;

std::string QueryParam(const std::string& url, const std::string& name) {
  auto q = url.find('?');
  if (q == std::string::npos) return "";
  for (const auto& [k, v] : http::ParseQuery(std::string_view(url).substr(q + 1))) {
    if (k == name) return v;
  }
  return "";
}

class BrowserLogin : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    OidcProvider::Options options;
    options.serve_webapp = true;
    provider_ = OidcProvider::Start(tmp_.path() / "oidc", &error, options);
    ASSERT_NE(provider_, nullptr) << error;
    state_ = core::Base64UrlEncode(core::RandomBytes(12));
    // An authorization request as a relying party (the bind backend) sends the browser. The
    // g_profile scope makes glewlwyd ask alice to grant it, so the flow also goes through the
    // consent screen.
    authorize_url_ = provider_->issuer() + "/auth?response_type=code&client_id=" +
                     core::PercentEncode(provider_->client_id()) +
                     "&redirect_uri=" + core::PercentEncode(provider_->redirect_uri()) +
                     "&scope=openid%20g_profile&state=" + state_ + "&nonce=n-" + state_;
    browser_.intercept_prefixes = {provider_->redirect_uri()};
    // A fresh file (TestArtifactsDir() starts empty): the first flow starts logged out.
    browser_.storage_state = artifacts_ / "cookies.json";
  }

  TempDir tmp_{"klutch-browser-login"};
  fs::path artifacts_ = TestArtifactsDir();
  std::unique_ptr<OidcProvider> provider_;
  std::string state_;
  std::string authorize_url_;
  BrowserOptions browser_;
};

TEST_F(BrowserLogin, WebFormLoginRedirectsToTheClientWithACode) {
  BrowserFlow flow;
  flow.Goto(authorize_url_)
      .WaitForSelector("input#password")
      .Screenshot(artifacts_ / "glewlwyd-login.png")
      .GlewlwydLogin("alice", "alice-pw")
      .WaitForUrlPrefix(provider_->redirect_uri())
      .Url("callback")
      .Text("callback-text");
  auto result = RunBrowserFlow(flow, browser_);
  ASSERT_TRUE(result.ok()) << result.status().ToString() << "\nglewlwyd log:\n" << provider_->log();

  // The browser went through glewlwyd's login page to the redirect URI, with our state.
  const std::string& callback = result->values["callback"];
  EXPECT_EQ(callback.rfind(provider_->redirect_uri() + "?", 0), 0u) << callback;
  EXPECT_EQ(QueryParam(callback, "state"), state_) << callback;
  std::string code = QueryParam(callback, "code");
  ASSERT_FALSE(code.empty()) << callback;
  ASSERT_EQ(result->intercepted.size(), 1u);
  EXPECT_EQ(result->intercepted[0], callback);
  EXPECT_EQ(result->final_url, callback);
  EXPECT_NE(result->values["callback-text"].find("Intercepted by the test"), std::string::npos);
  bool saw_login_page = false;
  for (const auto& url : result->visited) {
    saw_login_page = saw_login_page || url.rfind(provider_->base_url() + "/login.html", 0) == 0;
  }
  EXPECT_TRUE(saw_login_page) << "no visit to " << provider_->base_url() << "/login.html";
  EXPECT_GT(fs::file_size(artifacts_ / "glewlwyd-login.png"), 1000u);

  // The code is real: the token endpoint exchanges it for an ID token.
  std::string form = "grant_type=authorization_code&code=" + core::PercentEncode(code) +
                     "&redirect_uri=" + core::PercentEncode(provider_->redirect_uri());
  auto token = provider_->Request(
      "POST", "/api/oidc/token", form, "application/x-www-form-urlencoded", {},
      "Basic " + core::Base64Encode(provider_->client_id() + ":" + provider_->client_secret()));
  ASSERT_TRUE(token.ok()) << token.status().ToString();
  EXPECT_EQ(token->status, 200) << token->body;
  EXPECT_NE(token->body.find("\"id_token\""), std::string::npos) << token->body;

  // The session cookie was saved: a second flow with the same storage state finds alice
  // logged in (glewlwyd asks only to continue) and is sent back to the client.
  BrowserFlow again;
  again.Goto(authorize_url_)
      .WaitForSelector("text=Hello alice")
      .Screenshot(artifacts_ / "glewlwyd-continue.png")
      .GlewlwydLogin("alice", "alice-pw")
      .WaitForUrlPrefix(provider_->redirect_uri())
      .Url("callback");
  auto second = RunBrowserFlow(again, browser_);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_FALSE(QueryParam(second->values["callback"], "code").empty())
      << second->values["callback"];
}

TEST_F(BrowserLogin, WrongPasswordFailsTheStepWithAScreenshot) {
  BrowserFlow flow;
  flow.Goto(authorize_url_).GlewlwydLogin("alice", "not-the-password");
  browser_.step_timeout = std::chrono::seconds(10);
  auto result = RunBrowserFlow(flow, browser_);
  ASSERT_FALSE(result.ok());
  const std::string message = result.status().message();
  EXPECT_NE(message.find("step 2 of 2 (glewlwydLogin"), std::string::npos) << message;
  EXPECT_NE(message.find("Authentication error"), std::string::npos) << message;
  EXPECT_EQ(message.find("not-the-password"), std::string::npos) << "password in " << message;
  auto shot = message.find("screenshot at failure: ");
  ASSERT_NE(shot, std::string::npos) << message;
  fs::path png = message.substr(shot + 23, message.find('\n', shot) - shot - 23);
  EXPECT_TRUE(fs::exists(png)) << png;
}

}  // namespace
}  // namespace klutch::testing
