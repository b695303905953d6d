// The RabbitMQ engine behind a9s-messaging: an instance is one RabbitMQ 3.10 node (Debian's
// rabbitmq-server, node 0) with its own node name, Erlang cookie (its own HOME), data
// directory and ports, and its own `epmd` (node 1) on a port of its own, so that nothing of an
// instance outlives it. Ports: AMQP (or AMQPS on -ssl plans), the management API (HTTP or
// HTTPS), epmd and Erlang distribution. The owner administers it through the management API
// as `klutch_admin` (no Erlang CLI: Debian's rabbitmqctl runs only as root or rabbitmq, and
// each call starts a VM). A binding is a user with a vhost of its own and every permission on
// it; backups are the node's definitions (users, vhosts, permissions, queues, exchanges,
// bindings, policies; not messages), which a restore imports again.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <regex>
#include <set>
#include <system_error>

#include "core/file.h"
#include "core/random.h"
#include "core/strings.h"
#include "engines/data_service.h"
#include "http/client.h"
#include "machinery/gofmt.h"

namespace klutch::engines {
namespace rabbitmq {  // its own names: the engines build as one unit (ADR 0015)
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

constexpr int kServerNode = 0;
constexpr int kEpmdNode = 1;
// Indices into Instance::ports.
constexpr size_t kAmqpPort = 0, kManagementPort = 1, kEpmdPort = 2, kDistPort = 3;

core::Status CheckStringList(const std::string& key, const Json& value, const std::regex& item,
                             std::string_view what, size_t max) {
  bool ok = value.is_array() && !value.empty() && value.size() <= max;
  for (size_t i = 0; ok && i < value.size(); ++i) {
    const auto* s = value[i].get_ptr<const std::string*>();
    ok = s != nullptr && std::regex_match(*s, item);
  }
  if (!ok) {
    return core::Invalid(fmt::format("parameter {}: {} is not a list of 1 to {} {}", key,
                                     ShownValue(value), max, what));
  }
  return core::Status::Ok();
}

core::Status CheckParameter(const std::string& key, const Json& value) {
  if (key == "consumer_timeout") {
    const auto* i = value.get_ptr<const int64_t*>();
    const auto* u = value.get_ptr<const uint64_t*>();
    int64_t ms = i ? *i : u && *u < 4294967296ULL ? static_cast<int64_t>(*u) : -1;
    if (ms < 1800000 || ms > 4294967295LL) {
      return core::Invalid(fmt::format(
          "parameter consumer_timeout: {} is not a number of milliseconds from 1800000 (30 "
          "minutes) to 4294967295",
          ShownValue(value)));
    }
    return core::Status::Ok();
  }
  if (key == "tls-protocols") {
    static const std::regex kVersion("^tlsv1\\.[23]$");
    return CheckStringList(key, value, kVersion, "of tlsv1.2 and tlsv1.3", 2);
  }
  if (key == "tls-ciphers") {
    static const std::regex kCipher("^[A-Za-z0-9_-]{1,100}$");
    return CheckStringList(key, value, kCipher,
                           "cipher suite names (OpenSSL's or the RFC's: letters, digits, _ and -)",
                           64);
  }
  return core::Invalid(fmt::format(
      "unknown parameter {}; Messaging instances accept consumer_timeout, tls-protocols, "
      "tls-ciphers",
      core::GoQuote(key)));
}

// An IPv4 address as an Erlang tuple ({127,0,0,1}) for kernel's inet_dist_use_interface.
std::string ErlangAddress(const std::string& host) {
  std::string out = "{";
  for (char c : host) out += c == '.' ? ',' : c;
  return out + "}";
}

// A name for the management API's paths (vhosts and users are the broker's b<12 hex> names).
std::string PathSegment(std::string_view s) { return core::PercentEncode(s); }

class RabbitmqService final : public DataService {
 public:
  explicit RabbitmqService(EngineContext ctx) : ctx_(std::move(ctx)) {}

  NodeSpec Node(const Instance& in, const PlanLimits& plan, int index) const override {
    NodeSpec spec;
    spec.process.user = ctx_.user;
    spec.find_by_match = true;
    const fs::path dir = ctx_.NodeDir(in.number, kServerNode);
    if (index == kEpmdNode) {
      const std::string port = std::to_string(in.ports[kEpmdPort]);
      spec.process.argv = {ctx_.epmd.string(), "-port", port, "-address", ctx_.host};
      spec.process.output_file = dir / "epmd.log";
      spec.match = "-port " + port + " -address";
      const std::string host = ctx_.host;
      const int p = in.ports[kEpmdPort];
      spec.ready = [host, p] { return PortAnswers(host, p); };
      return spec;
    }
    spec.process.argv = {ctx_.rabbitmq_server.string()};
    spec.process.env = {
        "HOME=" + (dir / "home").string(), fmt::format("ERL_EPMD_PORT={}", in.ports[kEpmdPort]),
        fmt::format("RABBITMQ_NODENAME=klutch{}@localhost", in.number),
        fmt::format("RABBITMQ_DIST_PORT={}", in.ports[kDistPort]),
        "RABBITMQ_MNESIA_BASE=" + (dir / "mnesia").string(),
        "RABBITMQ_LOG_BASE=" + (dir / "log").string(), "RABBITMQ_LOGS=-",
        "RABBITMQ_CONFIG_FILE=" + (dir / "rabbitmq.conf").string(),
        "RABBITMQ_ENABLED_PLUGINS_FILE=" + (dir / "enabled_plugins").string(),
        "RABBITMQ_PID_FILE=" + (dir / "rabbit.pid").string(),
        // Erlang distribution on loopback only (by default it listens on every interface),
        // and an epmd the boot might start itself too.
        "ERL_EPMD_ADDRESS=" + ctx_.host,
        "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS=-start_epmd false -kernel inet_dist_use_interface " +
            ErlangAddress(ctx_.host)};
    spec.process.output_file = dir / "server.log";
    spec.process.cwd = dir;  // where the VM would write erl_crash.dump
    // The Erlang VM's command line names the node's HOME.
    spec.match = "-home " + (dir / "home").string() + " ";
    const Instance copy = in;
    const PlanLimits limits = plan;
    spec.ready = [this, copy, limits] {
      auto r = Api(copy, limits, "GET", "/api/overview", {}, milliseconds(300));
      return r.ok() && r->status == 200;
    };
    return spec;
  }

  core::Status ValidateParameters(const Json& parameters) const override {
    if (!parameters.is_object()) return core::Invalid("parameters must be a JSON object");
    for (const auto& [key, value] : parameters.items()) {
      if (value.is_null() &&
          (key == "consumer_timeout" || key == "tls-protocols" || key == "tls-ciphers")) {
        continue;
      }
      KLUTCH_RETURN_IF_ERROR(CheckParameter(key, value));
    }
    return core::Status::Ok();
  }

  core::Status Provision(Instance& in, const PlanLimits& plan, NodeRunner& runner) override {
    if (in.ports.size() < 4) return core::Internal("a Messaging instance needs four ports");
    const fs::path dir = ctx_.NodeDir(in.number, kServerNode);
    std::error_code ec;
    fs::create_directories(dir / "home", ec);
    fs::create_directories(dir / "mnesia", ec);
    fs::create_directories(dir / "log", ec);
    if (ec) return core::Internal(fmt::format("create {}: {}", dir.string(), ec.message()));
    fs::permissions(ctx_.InstanceDir(in.number),
                    fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec, ec);
    fs::permissions(dir, fs::perms::owner_all, ec);
    // A cookie of our own: Erlang's generated one comes from a guessable 36-bit sequence.
    const fs::path cookie = dir / "home" / ".erlang.cookie";
    if (!fs::exists(cookie)) {
      KLUTCH_RETURN_IF_ERROR(core::WriteFileAtomic(cookie, core::RandomPassword(32)));
      fs::permissions(cookie, fs::perms::owner_read, ec);
    }
    KLUTCH_RETURN_IF_ERROR(ChownTo(ctx_.InstanceDir(in.number), ctx_.user));
    return Start(in, plan, runner);
  }

  core::Status Start(const Instance& in, const PlanLimits& plan, NodeRunner& runner) override {
    KLUTCH_RETURN_IF_ERROR(WriteConfig(in, plan));
    KLUTCH_RETURN_IF_ERROR(StartNode(in, plan, kEpmdNode, runner));
    return StartNode(in, plan, kServerNode, runner);
  }

  // rabbitmq.conf is read at boot: a changed plan or parameter restarts the node.
  core::Status Update(Instance& in, const PlanLimits& /*from*/, const PlanLimits& to,
                      NodeRunner& runner) override {
    KLUTCH_RETURN_IF_ERROR(WriteConfig(in, to));
    runner.Stop(in.id, kServerNode);
    KLUTCH_RETURN_IF_ERROR(StartNode(in, to, kEpmdNode, runner));
    return StartNode(in, to, kServerNode, runner);
  }

  core::Result<Json> Bind(const Instance& in, const PlanLimits& plan,
                          const Account& binding) override {
    const std::string vhost = PathSegment(binding.username);
    KLUTCH_RETURN_IF_ERROR(Must(in, plan, "PUT", "/api/vhosts/" + vhost, Json::object()));
    KLUTCH_RETURN_IF_ERROR(Must(in, plan, "PUT", "/api/users/" + vhost,
                                {{"password", binding.password}, {"tags", "management"}}));
    KLUTCH_RETURN_IF_ERROR(Must(in, plan, "PUT", "/api/permissions/" + vhost + "/" + vhost,
                                {{"configure", ".*"}, {"write", ".*"}, {"read", ".*"}}));
    const std::string user = core::PercentEncode(binding.username);
    const std::string password = core::PercentEncode(binding.password);
    const std::string scheme = plan.tls ? "https" : "http";
    const int api_port = in.ports[kManagementPort];
    const std::string api_uri =
        fmt::format("{}://{}:{}@{}:{}/api/", scheme, user, password, ctx_.host, api_port);
    const std::string management_uri =
        fmt::format("{}://{}:{}@{}:{}/", scheme, user, password, ctx_.host, api_port);
    const Json amqp = {{"host", ctx_.host},
                       {"hosts", Json::array({ctx_.host})},
                       {"password", binding.password},
                       {"port", in.ports[kAmqpPort]},
                       {"ssl", plan.tls},
                       {"uri", fmt::format("{}://{}:{}@{}:{}/{}", plan.tls ? "amqps" : "amqp", user,
                                           password, ctx_.host, in.ports[kAmqpPort], vhost)},
                       {"username", binding.username}};
    Json management = {{"host", ctx_.host},
                       {"hosts", Json::array({ctx_.host})},
                       {"password", binding.password},
                       {"path", "/"},
                       {"port", api_port},
                       {"ssl", plan.tls},
                       {"uri", management_uri},
                       {"uris", Json::array({management_uri})},
                       {"username", binding.username}};
    if (plan.tls) management["cacrt"] = ctx_.ca_pem;
    return Json{
        {"http_api_uri", api_uri},
        {"http_api_uris", Json::array({api_uri})},
        {"protocols", {{plan.tls ? "amqp_ssl" : "amqp", amqp}, {"management", management}}}};
  }

  // The binding's user and vhost go (its connections are closed with them), and with the
  // vhost its queues and their messages.
  core::Status Unbind(const Instance& in, const PlanLimits& plan, const Account& binding) override {
    const std::string name = PathSegment(binding.username);
    for (const std::string& path : {"/api/users/" + name, "/api/vhosts/" + name}) {
      KLUTCH_ASSIGN_OR_RETURN(auto r, Api(in, plan, "DELETE", path, {}, milliseconds(30000)));
      if (r.status != 204 && r.status != 404) {
        return core::Internal(fmt::format("RabbitMQ DELETE {}: {} {}", path, r.status, r.body));
      }
    }
    return core::Status::Ok();
  }

  core::Status Backup(const Instance& in, const PlanLimits& plan, const fs::path& out) override {
    KLUTCH_ASSIGN_OR_RETURN(auto r,
                            Api(in, plan, "GET", "/api/definitions", {}, milliseconds(600000)));
    if (r.status != 200) {
      return core::Internal(fmt::format("RabbitMQ definitions export: {} {}", r.status, r.body));
    }
    return core::WriteFileAtomic(out, r.body);
  }

  // Importing definitions adds what they hold and changes what differs; it removes nothing.
  core::Status Restore(const Instance& in, const PlanLimits& plan, const fs::path& file,
                       NodeRunner& /*runner*/) override {
    KLUTCH_ASSIGN_OR_RETURN(std::string text, core::ReadFile(file));
    auto definitions = machinery::ParseJson(text);
    if (!definitions.ok() || !definitions->is_object()) {
      return core::Invalid("the backup holds no RabbitMQ definitions");
    }
    KLUTCH_ASSIGN_OR_RETURN(Json kept, OnlyWhatExistsNow(in, plan, *definitions));
    return Must(in, plan, "POST", "/api/definitions", kept, milliseconds(600000));
  }

  std::string EnforceQuota(const Instance& in, const PlanLimits& plan) override {
    int64_t used = DirectorySize(ctx_.NodeDir(in.number, kServerNode) / "mnesia");
    if (used <= plan.disk_quota_bytes) return "";
    return fmt::format("disk quota exceeded: {} MiB of queues and messages of {} MiB", used >> 20,
                       plan.disk_quota_bytes >> 20);
  }

 private:
  // Whether something accepts TCP connections on host:port (epmd speaks no HTTP).
  static bool PortAnswers(const std::string& host, int port) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    bool ok = ::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) == 1 &&
              ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    ::close(fd);
    return ok;
  }

  // The names of GET `path` (users or vhosts) as they are now.
  core::Result<std::set<std::string>> Names(const Instance& in, const PlanLimits& plan,
                                            const std::string& path) const {
    KLUTCH_ASSIGN_OR_RETURN(auto r, Api(in, plan, "GET", path, {}, milliseconds(30000)));
    auto list = machinery::ParseJson(r.body);
    if (r.status != 200 || !list.ok() || !list->is_array()) {
      return core::Internal(fmt::format("RabbitMQ GET {}: {} {}", path, r.status, r.body));
    }
    std::set<std::string> names;
    for (const Json& item : *list) names.insert(machinery::GetString(item, {"name"}));
    return names;
  }

  // A backup's definitions without the users and vhosts that are gone since: importing them
  // would bring back a binding that was unbound (with its old password) and that no record
  // knows any more.
  core::Result<Json> OnlyWhatExistsNow(const Instance& in, const PlanLimits& plan,
                                       Json definitions) const {
    KLUTCH_ASSIGN_OR_RETURN(auto users, Names(in, plan, "/api/users"));
    KLUTCH_ASSIGN_OR_RETURN(auto vhosts, Names(in, plan, "/api/vhosts"));
    auto keep = [&](const char* key, const std::function<bool(const Json&)>& wanted) {
      auto it = definitions.find(key);
      if (it == definitions.end() || !it->is_array()) return;
      Json kept = Json::array();
      for (const Json& item : *it) {
        if (wanted(item)) kept.push_back(item);
      }
      *it = std::move(kept);
    };
    auto in_vhost = [&](const Json& item) {
      return vhosts.contains(machinery::GetString(item, {"vhost"}));
    };
    keep("users", [&](const Json& u) { return users.contains(machinery::GetString(u, {"name"})); });
    keep("vhosts",
         [&](const Json& v) { return vhosts.contains(machinery::GetString(v, {"name"})); });
    keep("permissions", [&](const Json& p) {
      return in_vhost(p) && users.contains(machinery::GetString(p, {"user"}));
    });
    keep("topic_permissions", [&](const Json& p) {
      return in_vhost(p) && users.contains(machinery::GetString(p, {"user"}));
    });
    for (const char* key : {"queues", "exchanges", "bindings", "policies", "parameters"}) {
      keep(key, in_vhost);
    }
    return definitions;
  }

  core::Result<http::ClientResponse> Api(const Instance& in, const PlanLimits& plan,
                                         std::string_view method, const std::string& path,
                                         const Json& body, milliseconds timeout) const {
    http::ClientOptions options{.host = ctx_.host,
                                .port = static_cast<uint16_t>(in.ports[kManagementPort]),
                                .tls = plan.tls,
                                .ca_pem = ctx_.ca_pem,
                                .timeout = timeout};
    http::Client client(options);
    http::Headers h;
    h.Add("Authorization",
          "Basic " + core::Base64Encode(std::string(kAdminUser) + ":" + in.admin_password));
    if (!body.is_null()) h.Add("Content-Type", "application/json");
    return client.Do(method, path, h, body.is_null() ? "" : machinery::Dump(body));
  }

  core::Status Must(const Instance& in, const PlanLimits& plan, std::string_view method,
                    const std::string& path, const Json& body,
                    milliseconds timeout = milliseconds(30000)) const {
    KLUTCH_ASSIGN_OR_RETURN(auto r, Api(in, plan, method, path, body, timeout));
    if (r.status < 200 || r.status >= 300) {
      return core::Internal(
          fmt::format("RabbitMQ {} {}: {} {}", method, path, r.status, core::Trim(r.body)));
    }
    return core::Status::Ok();
  }

  core::Status WriteConfig(const Instance& in, const PlanLimits& plan) const {
    const fs::path dir = ctx_.NodeDir(in.number, kServerNode);
    std::string conf = "# Written by klutch; changes here are replaced.\n";
    if (plan.tls) {
      KLUTCH_RETURN_IF_ERROR(EnsureServerCertificate(ctx_, dir / "tls"));
      const fs::path tls = dir / "tls";
      conf += fmt::format(
          "listeners.tcp = none\nlisteners.ssl.default = {0}:{1}\n"
          "ssl_options.cacertfile = {2}\nssl_options.certfile = {3}\nssl_options.keyfile = {4}\n"
          "ssl_options.verify = verify_none\nssl_options.fail_if_no_peer_cert = false\n"
          "management.ssl.ip = {0}\nmanagement.ssl.port = {5}\n"
          "management.ssl.cacertfile = {2}\nmanagement.ssl.certfile = {3}\n"
          "management.ssl.keyfile = {4}\n",
          ctx_.host, in.ports[kAmqpPort], (tls / "ca.crt").string(), (tls / "server.crt").string(),
          (tls / "server.key").string(), in.ports[kManagementPort]);
      int index = 1;
      if (auto it = in.parameters.find("tls-protocols");
          it != in.parameters.end() && CheckParameter("tls-protocols", *it).ok()) {
        for (const Json& v : *it) {
          conf += fmt::format("ssl_options.versions.{} = {}\n", index++,
                              *v.get_ptr<const std::string*>());
        }
      }
      index = 1;
      if (auto it = in.parameters.find("tls-ciphers");
          it != in.parameters.end() && CheckParameter("tls-ciphers", *it).ok()) {
        for (const Json& v : *it) {
          conf += fmt::format("ssl_options.ciphers.{} = {}\n", index++,
                              *v.get_ptr<const std::string*>());
        }
      }
    } else {
      conf += fmt::format(
          "listeners.tcp.default = {}:{}\nmanagement.tcp.ip = {}\n"
          "management.tcp.port = {}\n",
          ctx_.host, in.ports[kAmqpPort], ctx_.host, in.ports[kManagementPort]);
    }
    // The administrator exists from the first boot on (later boots leave users alone).
    conf += fmt::format(
        "default_user = {}\ndefault_pass = {}\ndefault_user_tags.administrator = true\n"
        "default_permissions.configure = .*\ndefault_permissions.read = .*\n"
        "default_permissions.write = .*\nloopback_users = none\n"
        "vm_memory_high_watermark.absolute = {}MiB\ndisk_free_limit.absolute = 50MB\n",
        kAdminUser, in.admin_password, std::max(plan.maxmemory_mb, 64));
    if (auto it = in.parameters.find("consumer_timeout");
        it != in.parameters.end() && CheckParameter("consumer_timeout", *it).ok()) {
      conf += fmt::format("consumer_timeout = {}\n", machinery::Dump(*it));
    }
    KLUTCH_RETURN_IF_ERROR(core::WriteFileAtomic(dir / "rabbitmq.conf", conf));
    KLUTCH_RETURN_IF_ERROR(
        core::WriteFileAtomic(dir / "enabled_plugins", "[rabbitmq_management].\n"));
    for (const char* name : {"rabbitmq.conf", "enabled_plugins"}) {
      fs::permissions(dir / name, fs::perms::owner_read | fs::perms::owner_write);
      KLUTCH_RETURN_IF_ERROR(ChownTo(dir / name, ctx_.user));
    }
    return core::Status::Ok();
  }

  core::Status StartNode(const Instance& in, const PlanLimits& plan, int node,
                         NodeRunner& runner) const {
    return StartAndWait(
        ctx_, runner, in.id, node, Node(in, plan, node),
        ctx_.NodeDir(in.number, kServerNode) / (node == kEpmdNode ? "epmd.log" : "server.log"),
        node == kEpmdNode ? "epmd" : "RabbitMQ");
  }

  EngineContext ctx_;
};

}  // namespace
}  // namespace rabbitmq

std::unique_ptr<DataService> NewRabbitmqService(const EngineContext& context) {
  return std::make_unique<rabbitmq::RabbitmqService>(context);
}

}  // namespace klutch::engines
