// The Redis engine behind a9s-keyvalue8: an instance is a `redis-server` (node 0) and, on
// replica plans, two replicas, each with its own data directory and loopback TLS port, run as
// the engine user. The owner administers them over a unix socket in the node directory
// (mode 0700) as the ACL user `klutch_admin`; the default user is off. A binding is an ACL
// user with every key and channel and no administrative commands.
#include <fmt/format.h>
#include <openssl/sha.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <regex>
#include <system_error>
#include <thread>

#include "core/file.h"
#include "core/strings.h"
#include "engines/data_service.h"
#include "machinery/gofmt.h"

namespace klutch::engines {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

// One reply of the Redis protocol (RESP2).
struct Reply {
  char type = 0;  // + - : $ *
  std::string text;
  int64_t number = 0;
  std::vector<Reply> items;
  bool is_error() const { return type == '-'; }
};

class RespConnection {
 public:
  static core::Result<RespConnection> Open(const fs::path& socket_path, milliseconds timeout) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::string path = socket_path.string();
    if (path.size() >= sizeof(addr.sun_path)) {
      return core::Internal(fmt::format("socket path too long: {}", path));
    }
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return core::Internal(fmt::format("socket: {}", std::strerror(errno)));
    timeval tv{.tv_sec = timeout.count() / 1000, .tv_usec = (timeout.count() % 1000) * 1000};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      int err = errno;
      ::close(fd);
      return core::Unavailable(fmt::format("connect to Redis at {}: {}", path, std::strerror(err)));
    }
    return RespConnection(fd);
  }
  RespConnection(RespConnection&& o) noexcept : fd_(o.fd_), buffer_(std::move(o.buffer_)) {
    o.fd_ = -1;
  }
  RespConnection& operator=(RespConnection&&) = delete;
  ~RespConnection() {
    if (fd_ >= 0) ::close(fd_);
  }

  core::Result<Reply> Command(const std::vector<std::string>& args) {
    std::string out = fmt::format("*{}\r\n", args.size());
    for (const auto& a : args) out += fmt::format("${}\r\n{}\r\n", a.size(), a);
    size_t sent = 0;
    while (sent < out.size()) {
      ssize_t n = ::send(fd_, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return core::Unavailable(fmt::format("Redis: send: {}", std::strerror(errno)));
      sent += static_cast<size_t>(n);
    }
    return ReadReply();
  }

  // Command() that turns an error reply into a status naming the command.
  core::Result<Reply> Must(const std::vector<std::string>& args) {
    KLUTCH_ASSIGN_OR_RETURN(Reply r, Command(args));
    if (r.is_error()) {
      return core::Internal(
          fmt::format("Redis {} {}: {}", args[0], args.size() > 1 ? args[1] : "", r.text));
    }
    return r;
  }

 private:
  explicit RespConnection(int fd) : fd_(fd) {}

  core::Result<std::string> ReadLine() {
    while (true) {
      size_t pos = buffer_.find("\r\n");
      if (pos != std::string::npos) {
        std::string line = buffer_.substr(0, pos);
        buffer_.erase(0, pos + 2);
        return line;
      }
      KLUTCH_RETURN_IF_ERROR(Fill());
    }
  }
  core::Status Fill() {
    char chunk[8192];
    ssize_t n = ::recv(fd_, chunk, sizeof(chunk), 0);
    if (n <= 0) return core::Unavailable("Redis: connection closed or timed out");
    buffer_.append(chunk, static_cast<size_t>(n));
    return core::Status::Ok();
  }
  core::Result<Reply> ReadReply() {
    KLUTCH_ASSIGN_OR_RETURN(std::string line, ReadLine());
    if (line.empty()) return core::Internal("Redis: empty reply line");
    Reply r;
    r.type = line[0];
    std::string rest = line.substr(1);
    switch (r.type) {
      case '+':
      case '-':
        r.text = rest;
        return r;
      case ':':
        r.number = core::ParseInt64(rest).value_or(0);
        return r;
      case '$': {
        int64_t len = core::ParseInt64(rest).value_or(-1);
        if (len < 0) return r;
        while (buffer_.size() < static_cast<size_t>(len) + 2) KLUTCH_RETURN_IF_ERROR(Fill());
        r.text = buffer_.substr(0, static_cast<size_t>(len));
        buffer_.erase(0, static_cast<size_t>(len) + 2);
        return r;
      }
      case '*': {
        int64_t count = core::ParseInt64(rest).value_or(-1);
        for (int64_t i = 0; i < count; ++i) {
          KLUTCH_ASSIGN_OR_RETURN(Reply item, ReadReply());
          r.items.push_back(std::move(item));
        }
        return r;
      }
      default:
        return core::Internal(fmt::format("Redis: unexpected reply {}", core::GoQuote(line)));
    }
  }

  int fd_ = -1;
  std::string buffer_;
};

// Broker parameters (data-services §5.1, KeyValue) and how they reach redis.conf. Every value
// is checked against what Redis 7 accepts for the setting before anything is written, and
// rendered by the engine (numbers, names from a list, or characters that need no escaping),
// so that no value the tenant sent reaches the file as text Redis might refuse or misread.
struct KvParam {
  const char* key;
  enum Kind {
    kInt,             // an integer from min to max
    kYesNo,           // yes/no (or a JSON boolean)
    kEnum,            // one of `values` (case-insensitive)
    kMemory,          // a Redis memory value, at most the plan's maxmemory
    kMaxmemory,       // a memory value, `0` or `dynamic`; capped by the plan
    kMaxclients,      // an integer; capped by the plan
    kCipherList,      // an OpenSSL cipher list
    kKeyspaceEvents,  // notify-keyspace-events flags
    kSnapshot,        // save rules
    kSentinel         // Sentinel settings (refused: no Sentinel runs here)
  } kind;
  int64_t min = 0;
  int64_t max = 0;
  std::vector<std::string> values = {};
};

constexpr int64_t kInt32Max = 2147483647;

const std::vector<KvParam>& Params() {
  static const std::vector<KvParam> params = {
      {"snapshot", KvParam::kSnapshot},
      {"repl-backlog-size", KvParam::kMemory},
      {"min-replicas-to-write", KvParam::kInt, 0, kInt32Max},
      {"min-replicas-max-lag", KvParam::kInt, 0, kInt32Max},
      {"lazyfree-lazy-eviction", KvParam::kYesNo},
      {"lazyfree-lazy-expire", KvParam::kYesNo},
      {"maxmemory", KvParam::kMaxmemory},
      {"maxmemory-policy",
       KvParam::kEnum,
       0,
       0,
       {"volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl", "allkeys-lru",
        "allkeys-lfu", "allkeys-random", "noeviction"}},
      // Redis takes up to 2^31-1 samples; more than 64 only burns the host's CPU on every
      // eviction.
      {"maxmemory-samples", KvParam::kInt, 1, 64},
      {"maxclients", KvParam::kMaxclients, 0, 4294967295LL},
      {"down-after-milliseconds", KvParam::kSentinel},
      {"failover-timeout", KvParam::kSentinel},
      {"hostname-resolution", KvParam::kSentinel},
      {"tls-protocols",
       KvParam::kEnum,
       0,
       0,
       {"TLSv1.2", "TLSv1.3", "TLSv1.2 TLSv1.3", "TLSv1.3 TLSv1.2"}},
      {"tls-ciphers", KvParam::kCipherList},
      {"tls-ciphersuites", KvParam::kCipherList},
      {"lua-time-limit", KvParam::kInt, 0, INT64_MAX},
      {"notify-keyspace-events", KvParam::kKeyspaceEvents},
  };
  return params;
}

const KvParam* FindParam(std::string_view key) {
  for (const auto& p : Params()) {
    if (key == p.key) return &p;
  }
  return nullptr;
}

std::string Sha256Hex(std::string_view s) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(s.data()), s.size(), digest);
  return core::HexEncode(std::string_view(reinterpret_cast<const char*>(digest), sizeof(digest)));
}

std::string Quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// A validated parameter's text ("" when it is not a string).
std::string_view StringOf(const Json& v) {
  const auto* s = v.get_ptr<const std::string*>();
  return s ? std::string_view(*s) : std::string_view();
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::optional<int64_t> AsRedisInt(const Json& v) {
  if (const auto* i = v.get_ptr<const int64_t*>()) return *i;
  if (const auto* u = v.get_ptr<const uint64_t*>()) {
    if (*u <= static_cast<uint64_t>(INT64_MAX)) return static_cast<int64_t>(*u);
  }
  if (const auto* s = v.get_ptr<const std::string*>()) {
    if (!s->empty() && std::all_of(s->begin(), s->end(),
                                   [](char c) { return (c >= '0' && c <= '9') || c == '-'; })) {
      return core::ParseInt64(*s);
    }
  }
  return std::nullopt;
}

// A Redis memory value in bytes (saturating at INT64_MAX): a JSON integer >= 0, or a string
// of digits with an optional unit b, k (1000), kb (1024), m, mb, g, gb in any case.
std::optional<int64_t> MemoryBytes(const Json& v) {
  if (auto i = v.get_ptr<const int64_t*>()) return *i >= 0 ? std::optional(*i) : std::nullopt;
  if (auto u = v.get_ptr<const uint64_t*>()) {
    return static_cast<int64_t>(std::min<uint64_t>(*u, static_cast<uint64_t>(INT64_MAX)));
  }
  const auto* s = v.get_ptr<const std::string*>();
  static const std::regex kMemory("^(0|[1-9][0-9]*)(b|k|kb|m|mb|g|gb)?$", std::regex::icase);
  std::smatch m;
  if (s == nullptr || s->size() > 64 || !std::regex_match(*s, m, kMemory)) return std::nullopt;
  std::string unit = Lower(m[2].str());
  int64_t factor = unit == "k"    ? 1000
                   : unit == "kb" ? 1024
                   : unit == "m"  ? 1000 * 1000
                   : unit == "mb" ? 1024 * 1024
                   : unit == "g"  ? 1000 * 1000 * 1000
                   : unit == "gb" ? int64_t{1024} * 1024 * 1024
                                  : 1;
  int64_t number = 0;
  for (char c : m[1].str()) {
    if (__builtin_mul_overflow(number, int64_t{10}, &number) ||
        __builtin_add_overflow(number, int64_t{c - '0'}, &number)) {
      return INT64_MAX;
    }
  }
  int64_t bytes = 0;
  if (__builtin_mul_overflow(number, factor, &bytes)) return INT64_MAX;
  return bytes;
}

bool CipherListChars(std::string_view s) {
  return !s.empty() && s.size() <= 1024 && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           std::string_view(":+!@=_.,-").find(c) != std::string_view::npos;
  });
}

std::optional<std::string> Snapshot(const Json& v) {
  std::optional<bool> on;
  if (const auto* b = v.get_ptr<const bool*>()) on = *b;
  if (const auto* s = v.get_ptr<const std::string*>()) {
    if (*s == "true" || *s == "yes" || *s == "on") on = true;
    if (*s == "false" || *s == "no" || *s == "off") on = false;
  }
  if (on) return *on ? std::string("3600 1 300 100 60 10000") : std::string("\"\"");
  // The a9s KeyValue form the XRD validates: "['save 900 1','save 300 10']", "[]" for none.
  const auto* s = v.get_ptr<const std::string*>();
  static const std::regex kRules(
      R"(^\[('save [1-9][0-9]{0,8} [1-9][0-9]{0,8}'(,'save [1-9][0-9]{0,8} [1-9][0-9]{0,8}')*)?\]$)");
  if (s == nullptr || !std::regex_match(*s, kRules)) return std::nullopt;
  std::string out;
  static const std::regex kRule(R"('save ([0-9]+) ([0-9]+)')");
  for (auto it = std::sregex_iterator(s->begin(), s->end(), kRule); it != std::sregex_iterator();
       ++it) {
    out += fmt::format("{}{} {}", out.empty() ? "" : " ", (*it)[1].str(), (*it)[2].str());
  }
  return out.empty() ? std::string("\"\"") : out;
}

// Checks one parameter: "" when Redis accepts it, otherwise what is accepted.
std::string CheckValue(const KvParam& p, const Json& v) {
  std::string got = machinery::Dump(v);
  switch (p.kind) {
    case KvParam::kInt:
    case KvParam::kMaxclients: {
      auto i = AsRedisInt(v);
      if (i && *i >= p.min && *i <= p.max) return "";
      return fmt::format("{} is not an integer from {} to {}{}", got, p.min, p.max,
                         p.kind == KvParam::kMaxclients
                             ? " (0 and values above the plan's maxclients mean the plan's)"
                             : "");
    }
    case KvParam::kYesNo:
      if (v.is_boolean()) return "";
      if (const auto* s = v.get_ptr<const std::string*>();
          s != nullptr && (Lower(*s) == "yes" || Lower(*s) == "no")) {
        return "";
      }
      return fmt::format("{} is not yes or no", got);
    case KvParam::kEnum:
      if (const auto* s = v.get_ptr<const std::string*>()) {
        for (const auto& allowed : p.values) {
          if (Lower(*s) == Lower(allowed)) return "";
        }
      }
      return fmt::format("{} is not one of {}", got, core::Join(p.values, ", "));
    case KvParam::kMemory:
      if (auto b = MemoryBytes(v); b && *b > 0) return "";
      return fmt::format(
          "{} is not an amount of memory greater than 0: a number of bytes, optionally followed "
          "by k, kb, m, mb, g or gb (values above the plan's maxmemory mean the plan's)",
          got);
    case KvParam::kMaxmemory:
      if (const auto* s = v.get_ptr<const std::string*>(); s != nullptr && *s == "dynamic") {
        return "";
      }
      if (MemoryBytes(v)) return "";
      return fmt::format(
          "{} is not \"dynamic\", 0 or an amount of memory: a number of bytes, optionally "
          "followed by k, kb, m, mb, g or gb (dynamic, 0 and values above the plan's maxmemory "
          "mean the plan's)",
          got);
    case KvParam::kCipherList:
      if (const auto* s = v.get_ptr<const std::string*>(); s != nullptr && CipherListChars(*s)) {
        return "";
      }
      return fmt::format(
          "{} is not an OpenSSL cipher list: 1 to 1024 letters, digits and :+!@=_.,- (the names "
          "are checked by the server when it starts)",
          got);
    case KvParam::kKeyspaceEvents: {
      static const std::regex kEvents(R"(^$|^[KEg$lshzxetmdnA]*[KE][KEg$lshzxetmdnA]*$)");
      if (const auto* s = v.get_ptr<const std::string*>();
          s != nullptr && s->size() <= 64 && std::regex_match(*s, kEvents)) {
        return "";
      }
      return fmt::format(
          "{} is not \"\" or keyspace event flags: letters of KEg$lshzxetmdnA with at least one "
          "K or E",
          got);
    }
    case KvParam::kSnapshot:
      if (Snapshot(v)) return "";
      return fmt::format(
          "{} is not [], ['save <seconds> <changes>', ...] (numbers from 1 to 999999999) or "
          "true/false",
          got);
    case KvParam::kSentinel:
      return "";
  }
  return "";
}

// The redis.conf value of a checked parameter; the plan's limits cap memory and clients.
std::string Render(const KvParam& p, const Json& v, const PlanLimits& limits) {
  const int64_t plan_bytes = int64_t{limits.maxmemory_mb} << 20;
  switch (p.kind) {
    case KvParam::kInt:
      return std::to_string(AsRedisInt(v).value_or(p.min));
    case KvParam::kMaxclients: {
      int64_t n = AsRedisInt(v).value_or(0);
      if (n <= 0 || n > limits.max_connections) n = limits.max_connections;
      return std::to_string(n);
    }
    case KvParam::kYesNo:
      if (const auto* b = v.get_ptr<const bool*>()) return *b ? "yes" : "no";
      return Lower(StringOf(v));
    case KvParam::kEnum:
      for (const auto& allowed : p.values) {
        if (Lower(StringOf(v)) == Lower(allowed)) return Quote(allowed);
      }
      return "";
    case KvParam::kMemory:
      return std::to_string(std::min(MemoryBytes(v).value_or(plan_bytes), plan_bytes));
    case KvParam::kMaxmemory: {
      // `dynamic` lets the engine choose: the plan's maxmemory; `0` (no limit) is not
      // offered beyond the plan either.
      int64_t bytes = StringOf(v) == "dynamic" ? plan_bytes : MemoryBytes(v).value_or(plan_bytes);
      if (bytes <= 0 || bytes > plan_bytes) bytes = plan_bytes;
      return std::to_string(bytes);
    }
    case KvParam::kCipherList:
    case KvParam::kKeyspaceEvents:
      return Quote(StringOf(v));
    case KvParam::kSnapshot:
      return Snapshot(v).value_or("\"\"");
    case KvParam::kSentinel:
      return "";
  }
  return "";
}

class RedisService final : public DataService {
 public:
  explicit RedisService(EngineContext ctx) : ctx_(std::move(ctx)) {}

  fs::path NodeDir(const Instance& in, int node) const { return ctx_.NodeDir(in.number, node); }
  fs::path Socket(const Instance& in, int node) const { return NodeDir(in, node) / "r.sock"; }

  NodeSpec Node(const Instance& in, const PlanLimits& /*plan*/, int index) const override {
    NodeSpec spec;
    spec.process.argv = {ctx_.redis_server.string(), (NodeDir(in, index) / "redis.conf").string()};
    spec.process.user = ctx_.user;
    spec.process.output_file = NodeDir(in, index) / "redis.log";
    spec.pid_file = NodeDir(in, index) / "redis.pid";
    // The process title names the config file (proc-title-template below), so that adoption
    // never picks up another instance's server through a stale PID file.
    spec.match = (NodeDir(in, index) / "redis.conf").string();
    fs::path socket = Socket(in, index);
    spec.ready = [socket] {
      auto conn = RespConnection::Open(socket, milliseconds(500));
      if (!conn.ok()) return false;
      auto reply = conn->Command({"PING"});
      // Without AUTH the answer is NOAUTH: the server is up and loaded.
      return reply.ok() && (reply->type == '+' || reply->text.starts_with("NOAUTH"));
    };
    return spec;
  }

  core::Status ValidateParameters(const Json& parameters) const override {
    if (!parameters.is_object()) return core::Invalid("parameters must be a JSON object");
    for (const auto& [key, value] : parameters.items()) {
      const KvParam* p = FindParam(key);
      if (p == nullptr) {
        std::vector<std::string> known;
        for (const auto& k : Params()) known.emplace_back(k.key);
        return core::Invalid(fmt::format("unknown parameter {}; KeyValue instances accept {}",
                                         core::GoQuote(key), core::Join(known, ", ")));
      }
      if (value.is_null()) continue;
      if (p->kind == KvParam::kSentinel) {
        return core::Invalid(fmt::format(
            "parameter {} configures Redis Sentinel, which this engine does not run (replica "
            "plans use plain Redis replication); remove it",
            key));
      }
      if (std::string problem = CheckValue(*p, value); !problem.empty()) {
        return core::Invalid(fmt::format("parameter {}: {}", key, problem));
      }
    }
    return core::Status::Ok();
  }

  core::Status Provision(Instance& in, const PlanLimits& plan, NodeRunner& runner) override {
    for (int node = 0; node < plan.nodes; ++node) {
      KLUTCH_RETURN_IF_ERROR(InitNode(in, plan, node));
      KLUTCH_RETURN_IF_ERROR(StartNode(in, plan, node, runner));
    }
    return core::Status::Ok();
  }

  core::Status Start(const Instance& in, const PlanLimits& plan, NodeRunner& runner) override {
    for (int node = 0; node < plan.nodes && node < static_cast<int>(in.ports.size()); ++node) {
      if (!fs::exists(NodeDir(in, node) / kInitializedMarker)) continue;
      KLUTCH_RETURN_IF_ERROR(WriteConfig(in, plan, node));
      KLUTCH_RETURN_IF_ERROR(StartNode(in, plan, node, runner));
    }
    return core::Status::Ok();
  }

  core::Status Update(Instance& in, const PlanLimits& from, const PlanLimits& to,
                      NodeRunner& runner) override {
    int old_nodes = std::min<int>(from.nodes, static_cast<int>(in.ports.size()));
    for (int node = 0; node < old_nodes; ++node) {
      KLUTCH_RETURN_IF_ERROR(WriteConfig(in, to, node));
      // Settings change with a restart; SAVE first so that no write is lost.
      if (auto conn = Admin(in, node); conn.ok()) (void)conn->Command({"SAVE"});
      runner.Stop(in.id, node);
      KLUTCH_RETURN_IF_ERROR(StartNode(in, to, node, runner));
    }
    for (int node = old_nodes; node < to.nodes; ++node) {
      KLUTCH_RETURN_IF_ERROR(InitNode(in, to, node));
      KLUTCH_RETURN_IF_ERROR(StartNode(in, to, node, runner));
    }
    return core::Status::Ok();
  }

  core::Result<Json> Bind(const Instance& in, const PlanLimits& plan,
                          const Account& binding) override {
    for (int node = 0; node < plan.nodes && node < static_cast<int>(in.ports.size()); ++node) {
      KLUTCH_ASSIGN_OR_RETURN(auto conn, Admin(in, node));
      KLUTCH_RETURN_IF_ERROR(
          conn.Must({"ACL", "SETUSER", binding.username, "reset", "on", ">" + binding.password,
                     "~*", "&*", "+@all", "-@admin", "-@dangerous", "+info", "+ping"})
              .status());
      KLUTCH_RETURN_IF_ERROR(conn.Must({"ACL", "SAVE"}).status());
    }
    Json credentials = {
        {"host", ctx_.host},
        {"hosts", Json::array({ctx_.host})},
        {"load_balanced_host", ctx_.host},
        {"valkey",
         {{"password", binding.password}, {"port", in.ports[0]}, {"username", binding.username}}}};
    if (plan.tls) credentials["cacrt"] = ctx_.ca_pem;
    return credentials;
  }

  core::Status Unbind(const Instance& in, const PlanLimits& /*plan*/,
                      const Account& binding) override {
    for (int node = 0; node < static_cast<int>(in.ports.size()); ++node) {
      if (!fs::exists(NodeDir(in, node) / kInitializedMarker)) continue;
      KLUTCH_ASSIGN_OR_RETURN(auto conn, Admin(in, node));
      // ACL DELUSER also disconnects the user's clients.
      KLUTCH_RETURN_IF_ERROR(conn.Must({"ACL", "DELUSER", binding.username}).status());
      KLUTCH_RETURN_IF_ERROR(conn.Must({"ACL", "SAVE"}).status());
    }
    return core::Status::Ok();
  }

  core::Status Backup(const Instance& in, const PlanLimits& /*plan*/,
                      const fs::path& out) override {
    KLUTCH_ASSIGN_OR_RETURN(auto conn, Admin(in, 0));
    // BGSAVE keeps serving clients while the snapshot is written (the fork happens before
    // it answers); wait for it to finish and check how it went.
    auto saving = [&conn]() -> core::Result<bool> {
      KLUTCH_ASSIGN_OR_RETURN(Reply info, conn.Must({"INFO", "persistence"}));
      return info.text.find("rdb_bgsave_in_progress:1") != std::string::npos;
    };
    while (true) {
      KLUTCH_ASSIGN_OR_RETURN(Reply started, conn.Command({"BGSAVE"}));
      if (!started.is_error()) break;
      if (started.text.find("in progress") == std::string::npos) {
        return core::Internal("Redis BGSAVE: " + started.text);
      }
      std::this_thread::sleep_for(milliseconds(20));  // another save runs; then ours
    }
    while (true) {
      KLUTCH_ASSIGN_OR_RETURN(bool running, saving());
      if (!running) break;
      std::this_thread::sleep_for(milliseconds(20));
    }
    KLUTCH_ASSIGN_OR_RETURN(Reply info, conn.Must({"INFO", "persistence"}));
    if (info.text.find("rdb_last_bgsave_status:ok") == std::string::npos) {
      return core::Internal("Redis BGSAVE failed; see the node's redis.log");
    }
    std::error_code ec;
    fs::copy_file(NodeDir(in, 0) / "data" / "dump.rdb", out, fs::copy_options::overwrite_existing,
                  ec);
    if (ec) return core::Internal(fmt::format("copy dump.rdb: {}", ec.message()));
    return core::Status::Ok();
  }

  core::Status Restore(const Instance& in, const PlanLimits& plan, const fs::path& file,
                       NodeRunner& runner) override {
    int nodes = std::min<int>(plan.nodes, static_cast<int>(in.ports.size()));
    for (int node = nodes - 1; node >= 0; --node) runner.Stop(in.id, node);
    std::error_code ec;
    fs::copy_file(file, NodeDir(in, 0) / "data" / "dump.rdb", fs::copy_options::overwrite_existing,
                  ec);
    if (ec) return core::Internal(fmt::format("restore dump.rdb: {}", ec.message()));
    KLUTCH_RETURN_IF_ERROR(ChownTo(NodeDir(in, 0) / "data" / "dump.rdb", ctx_.user));
    for (int node = 1; node < nodes; ++node)
      fs::remove(NodeDir(in, node) / "data" / "dump.rdb", ec);
    for (int node = 0; node < nodes; ++node) {
      KLUTCH_RETURN_IF_ERROR(StartNode(in, plan, node, runner));
    }
    return core::Status::Ok();
  }

  std::string EnforceQuota(const Instance& in, const PlanLimits& plan) override {
    int64_t used = DirectorySize(NodeDir(in, 0) / "data");
    if (used <= plan.disk_quota_bytes) return "";
    return fmt::format("disk quota exceeded: {} MiB of snapshots used of {} MiB", used >> 20,
                       plan.disk_quota_bytes >> 20);
  }

 private:
  core::Result<RespConnection> Admin(const Instance& in, int node) const {
    KLUTCH_ASSIGN_OR_RETURN(auto conn, RespConnection::Open(Socket(in, node), milliseconds(10000)));
    KLUTCH_ASSIGN_OR_RETURN(Reply r, conn.Command({"AUTH", kAdminUser, in.admin_password}));
    if (r.is_error())
      return core::Internal(fmt::format("Redis AUTH as {}: {}", kAdminUser, r.text));
    return conn;
  }

  core::Status WriteConfig(const Instance& in, const PlanLimits& plan, int node) {
    fs::path dir = NodeDir(in, node);
    int port = in.ports[static_cast<size_t>(node)];
    std::string conf = "# Written by klutch; changes here are replaced.\n";
    conf += fmt::format("bind {}\nprotected-mode yes\ndaemonize no\n", ctx_.host);
    conf += "proc-title-template \"{title} {config-file}\"\n";
    if (plan.tls) {
      KLUTCH_RETURN_IF_ERROR(EnsureServerCertificate(ctx_, dir / "tls"));
      conf += fmt::format(
          "port 0\ntls-port {}\ntls-cert-file {}\ntls-key-file {}\ntls-ca-cert-file {}\n"
          "tls-auth-clients no\ntls-replication yes\n",
          port, Quote((dir / "tls" / "server.crt").string()),
          Quote((dir / "tls" / "server.key").string()), Quote((dir / "tls" / "ca.crt").string()));
    } else {
      conf += fmt::format("port {}\n", port);
    }
    conf += fmt::format(
        "unixsocket {}\nunixsocketperm 700\ndir {}\ndbfilename dump.rdb\npidfile {}\n"
        "aclfile {}\nappendonly no\nlogfile \"\"\nmaxmemory {}mb\nmaxclients {}\n",
        Quote(Socket(in, node).string()), Quote((dir / "data").string()),
        Quote((dir / "redis.pid").string()), Quote((dir / "users.acl").string()), plan.maxmemory_mb,
        plan.max_connections);
    conf += "save 3600 1 300 100 60 10000\n";
    for (const auto& [key, value] : in.parameters.items()) {
      const KvParam* p = FindParam(key);
      // Parameters were checked when they came in; one a record holds from before a check
      // existed is left out rather than written.
      if (p == nullptr || value.is_null() || p->kind == KvParam::kSentinel ||
          !CheckValue(*p, value).empty()) {
        continue;
      }
      conf += fmt::format("{} {}\n", p->kind == KvParam::kSnapshot ? "save" : key,
                          Render(*p, value, plan));
    }
    if (node > 0) {
      conf += fmt::format("replicaof {} {}\nmasteruser {}\nmasterauth {}\n", ctx_.host, in.ports[0],
                          kAdminUser, Quote(in.admin_password));
    }
    KLUTCH_RETURN_IF_ERROR(core::WriteFileAtomic(dir / "redis.conf", conf));
    return ChownTo(dir / "redis.conf", ctx_.user);
  }

  core::Status InitNode(const Instance& in, const PlanLimits& plan, int node) {
    fs::path dir = NodeDir(in, node);
    if (fs::exists(dir / kInitializedMarker)) return WriteConfig(in, plan, node);
    std::error_code ec;
    fs::remove_all(dir, ec);
    fs::create_directories(dir / "data", ec);
    if (ec) return core::Internal(fmt::format("create {}: {}", dir.string(), ec.message()));
    fs::permissions(ctx_.InstanceDir(in.number),
                    fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec, ec);
    if (Socket(in, node).string().size() >= sizeof(sockaddr_un::sun_path)) {
      return core::Internal(fmt::format(
          "the state directory {} is too deep for Redis' admin socket; use a shorter --state-dir",
          ctx_.instances_dir.string()));
    }
    std::string acl = fmt::format("user default off resetpass -@all\nuser {} on #{} ~* &* +@all\n",
                                  kAdminUser, Sha256Hex(in.admin_password));
    KLUTCH_RETURN_IF_ERROR(core::WriteFileAtomic(dir / "users.acl", acl));
    KLUTCH_RETURN_IF_ERROR(WriteConfig(in, plan, node));
    KLUTCH_RETURN_IF_ERROR(core::WriteFileAtomic(dir / kInitializedMarker, "redis\n"));
    fs::permissions(dir, fs::perms::owner_all, ec);
    return ChownTo(dir, ctx_.user);
  }

  core::Status StartNode(const Instance& in, const PlanLimits& plan, int node, NodeRunner& runner) {
    return StartAndWait(ctx_, runner, in.id, node, Node(in, plan, node),
                        NodeDir(in, node) / "redis.log", fmt::format("Redis node {}", node));
  }

  EngineContext ctx_;
};

}  // namespace

std::unique_ptr<DataService> NewRedisService(const EngineContext& context) {
  return std::make_unique<RedisService>(context);
}

}  // namespace klutch::engines
