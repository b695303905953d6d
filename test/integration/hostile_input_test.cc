// What a hostile client sends the real servers: a header field too large for the HTTP library's
// field list (65,534 bytes) or a chunked trailer that long once ended `klutch apiserver` and
// `klutch broker` (std::length_error out of an I/O thread, exit 134) before any
// authentication; `klutch up` restarted them, so one client could keep the Control Plane down.
// Each server now answers 431 and keeps serving. (The same for chunked trailers, which curl
// cannot send, is checked on raw sockets in src/http/server_test.cc.)
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <string>

#include "test/support/server_fixture.h"
#include "test/support/wait.h"

namespace klutch::testing {
namespace {

using namespace std::chrono_literals;

const std::filesystem::path kBin = KLUTCH_BIN_DIR;

class HostileInputTest : public ServerTest {
 protected:
  // curl's status code for `url` with `header` (read from a config file: no argv limit).
  std::string StatusWithHeader(const std::string& url, const std::string& header) {
    std::filesystem::path config = dir_.path() / "curl.config";
    std::ofstream(config) << "header = \"" << header << "\"\n";
    CommandResult r =
        RunShell("curl -sk -o /dev/null -w '%{http_code}' -K " + config.string() + " '" + url + "'",
                 {}, dir_.path(), 30s);
    return r.out;
  }
  std::string Status(const std::string& url) {
    return RunShell("curl -sk -o /dev/null -w '%{http_code}' '" + url + "'", {}, dir_.path(), 30s)
        .out;
  }
};

const std::string kBig = std::string(65534, 'a');

TEST_F(HostileInputTest, ApiServerAnswersOversizedHeadersWith431AndStaysUp) {
  EXPECT_EQ(StatusWithHeader(server_->url() + "/api", "X-Big: " + kBig), "431");
  EXPECT_EQ(StatusWithHeader(server_->url() + "/api", "Authorization: Bearer " + kBig), "431");
  EXPECT_TRUE(server_->process().running()) << server_->log();
  EXPECT_EQ(Status(server_->url() + "/healthz"), "200");
}

TEST_F(HostileInputTest, BrokerAnswersOversizedHeadersWith431AndStaysUp) {
  ChildProcess broker({(kBin / "klutch").string(), "broker", "--state-dir",
                       (dir_.path() / "broker").string(), "--listen", "127.0.0.1:0"},
                      dir_.path() / "broker.log");
  std::string url;
  ASSERT_TRUE(Eventually(
      [&] {
        std::smatch m;
        std::string log = ReadFileOrEmpty(dir_.path() / "broker.log");
        if (std::regex_search(log, m, std::regex(R"(serving on (http://127\.0\.0\.1:\d+))"))) {
          url = m[1].str();
        }
        return !url.empty() || !broker.running();
      },
      60s));
  ASSERT_FALSE(url.empty()) << ReadFileOrEmpty(dir_.path() / "broker.log");
  ASSERT_EQ(Status(url + "/healthz"), "200");
  EXPECT_EQ(StatusWithHeader(url + "/postgresql/v2/catalog", "X-Big: " + kBig), "431");
  EXPECT_EQ(StatusWithHeader(url + "/postgresql/v2/catalog", kBig + ": v"), "431");
  EXPECT_TRUE(broker.running()) << ReadFileOrEmpty(dir_.path() / "broker.log");
  EXPECT_EQ(Status(url + "/healthz"), "200");
}

}  // namespace
}  // namespace klutch::testing
