// BrokerProcess: `klutch broker` as a process for the benchmarks, with blocking OSB and
// backup-manager calls that exit the benchmark on any failure (a benchmark has no partial
// result worth printing).
#pragma once

#include <fmt/format.h>
#include <signal.h>

#include <filesystem>
#include <iostream>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "core/strings.h"
#include "http/client.h"
#include "machinery/json.h"
#include "machinery/object.h"
#include "test/bench/bench_util.h"
#include "test/support/process.h"
#include "test/support/wait.h"

namespace klutch::testing {

inline const std::string kKlutch = std::string(KLUTCH_BIN_DIR) + "/klutch";

class BrokerProcess {
 public:
  explicit BrokerProcess(const std::filesystem::path& dir) : dir_(dir) {
    child_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{kKlutch, "broker", "--listen", "127.0.0.1:0", "--state-dir",
                                 (dir / "state").string(), "--workers", "2"},
        dir / "broker.log");
    std::regex serving(R"(serving on http://127\.0\.0\.1:(\d+))");
    std::smatch m;
    bool up = Eventually([&] {
      std::string log = ReadFileOrEmpty(dir / "broker.log");
      if (std::regex_search(log, m, serving)) {
        port_ = std::stoi(m[1].str());
        return true;
      }
      return !child_->running();
    });
    if (!up || port_ == 0) {
      std::cerr << "klutch broker did not start:\n" << ReadFileOrEmpty(dir / "broker.log");
      std::exit(1);
    }
    auto creds = machinery::ParseJson(ReadFileOrEmpty(dir / "state" / "credentials.json"));
    if (creds.ok()) creds_ = *creds;
  }
  ~BrokerProcess() {
    child_->Signal(SIGTERM, std::chrono::seconds(120));
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  pid_t pid() const { return child_->pid(); }

  machinery::Json Call(const std::string& base, const std::string& method,
                       const std::string& target, const machinery::Json& body = nullptr,
                       int* status = nullptr) {
    http::Client client({.port = static_cast<uint16_t>(port_)});
    http::Headers h;
    std::string user = machinery::GetString(creds_, {base, "username"});
    std::string pass = machinery::GetString(creds_, {base, "password"});
    h.Add("Authorization", "Basic " + core::Base64Encode(user + ":" + pass));
    h.Add("X-Broker-API-Version", "2.14");
    auto r = client.Do(method, "/" + base + target, h, body.is_null() ? "" : machinery::Dump(body));
    if (!r.ok()) {
      std::cerr << method << " " << target << ": " << r.status().message() << "\n";
      std::exit(1);
    }
    if (status != nullptr) *status = r->status;
    auto j = machinery::ParseJson(r->body);
    return j.ok() ? *j : machinery::Json();
  }

  // Provision, then poll last_operation every 5 ms; seconds until succeeded.
  double Provision(const std::string& base, const std::string& id, const std::string& service,
                   const std::string& plan) {
    auto start = BenchClock::now();
    int status = 0;
    machinery::Json r =
        Call(base, "PUT", "/v2/service_instances/" + id + "?accepts_incomplete=true",
             {{"service_id", service},
              {"plan_id", plan},
              {"organization_guid", "o"},
              {"space_guid", "s"}},
             &status);
    if (status != 202) {
      std::cerr << "provision: " << status << " " << machinery::Dump(r) << "\n";
      std::exit(1);
    }
    WaitOperation(base, id, machinery::GetString(r, {"operation"}));
    return Seconds(start, BenchClock::now());
  }

  void WaitOperation(const std::string& base, const std::string& id, const std::string& op) {
    while (true) {
      int status = 0;
      machinery::Json r =
          Call(base, "GET", "/v2/service_instances/" + id + "/last_operation?operation=" + op,
               nullptr, &status);
      std::string state = machinery::GetString(r, {"state"});
      if (status == 410 || state == "succeeded") return;
      if (state == "failed") {
        std::cerr << "operation failed: " << machinery::Dump(r) << "\n";
        std::exit(1);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  machinery::Json Bind(const std::string& base, const std::string& id, const std::string& binding,
                       const std::string& service, const std::string& plan) {
    int status = 0;
    machinery::Json r =
        Call(base, "PUT", "/v2/service_instances/" + id + "/service_bindings/" + binding,
             {{"service_id", service}, {"plan_id", plan}}, &status);
    if (status != 201) {
      std::cerr << "bind: " << status << " " << machinery::Dump(r) << "\n";
      std::exit(1);
    }
    return r["credentials"];
  }

  void Deprovision(const std::string& base, const std::string& id, const std::string& service) {
    machinery::Json r = Call(base, "DELETE",
                             "/v2/service_instances/" + id + "?service_id=" + service +
                                 "&plan_id=p&accepts_incomplete=true");
    WaitOperation(base, id, machinery::GetString(r, {"operation"}));
  }

  // POST then poll every 10 ms until done; seconds.
  double BackupManagerJob(const std::string& type, const std::string& post_target,
                          const std::string& get_prefix) {
    auto start = BenchClock::now();
    int status = 0;
    machinery::Json r = Call(type + "-backup-manager", "POST", post_target, nullptr, &status);
    if (status != 201 && status != 202) {
      std::cerr << post_target << ": " << status << " " << machinery::Dump(r) << "\n";
      std::exit(1);
    }
    int64_t id = r["id"].get<int64_t>();
    while (true) {
      machinery::Json s = Call(type + "-backup-manager", "GET", get_prefix + std::to_string(id));
      std::string st = machinery::GetString(s, {"status"});
      if (st == "done") break;
      if (st == "failed") {
        std::cerr << "job failed: " << machinery::Dump(s) << "\n";
        std::exit(1);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    last_job_id_ = id;
    return Seconds(start, BenchClock::now());
  }
  int64_t last_job_id() const { return last_job_id_; }

 private:
  std::filesystem::path dir_;
  std::unique_ptr<ChildProcess> child_;
  int port_ = 0;
  machinery::Json creds_;
  int64_t last_job_id_ = 0;
};

}  // namespace klutch::testing
