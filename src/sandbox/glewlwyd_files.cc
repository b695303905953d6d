#include "sandbox/glewlwyd_files.h"

#include <utility>
#include <vector>

#include "core/file.h"
#include "machinery/json.h"

namespace klutch::sandbox {
namespace {

namespace fs = std::filesystem;
constexpr char kWebapp[] = "/usr/share/glewlwyd/webapp";

}  // namespace

core::Status WriteGlewlwydWebapp(const fs::path& dir) {
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir, ec);
  if (ec) return core::Internal("cannot create " + dir.string() + ": " + ec.message());
  for (const auto& entry : fs::directory_iterator(kWebapp, ec)) {
    if (entry.path().filename() == "config.json") continue;
    fs::copy(entry.path(), dir / entry.path().filename(), fs::copy_options::recursive, ec);
    if (ec) return core::Internal("cannot copy " + entry.path().string() + ": " + ec.message());
  }
  if (ec || !fs::exists(dir / "login.html")) {
    return core::Internal(std::string("glewlwyd's web app is missing in ") + kWebapp +
                          " (install the glewlwyd package: make deps)");
  }
  // Only these keys are read by the login page.
  machinery::Json config = {
      {"GlewlwydUrl", "./"},
      {"ProfileUrl", "profile.html"},
      {"AdminUrl", "index.html"},
      {"LoginUrl", "login.html"},
      {"CallbackPage", "callback.html"},
      {"PasswordMinLength", 8},
      {"lang", machinery::Json::array({"en"})},
      {"defaultScheme", ""},
      {"sessionSchemes", machinery::Json::array()},
      {"register", machinery::Json::array()},
      {"register-complete", machinery::Json::array()},
      {"pattern", {{"user", machinery::Json::array()}, {"client", machinery::Json::array()}}}};
  return core::WriteFileAtomic(dir / "config.json", machinery::Dump(config),
                               fs::perms::owner_read | fs::perms::owner_write |
                                   fs::perms::group_read | fs::perms::others_read);
}

std::string GlewlwydWebappConfig(const fs::path& dir) {
  static const std::vector<std::pair<std::string, std::string>> kTypes = {
      {".html", "text/html"},
      {".css", "text/css"},
      {".js", "application/javascript"},
      {".json", "application/json"},
      {".map", "application/json"},
      {".png", "image/png"},
      {".ico", "image/x-icon"},
      {".svg", "image/svg+xml"},
      {".ttf", "font/ttf"},
      {".eot", "application/vnd.ms-fontobject"},
      {".woff", "font/woff"},
      {".woff2", "font/woff2"}};
  std::string types;
  for (const auto& [extension, type] : kTypes) {
    if (!types.empty()) types += ",\n";
    types += "  { extension = \"" + extension + "\" mime_type = \"" + type + "\" compress = 0 }";
  }
  return "static_files_path=\"" + dir.string() + "/\"\nstatic_files_mime_types = (\n" + types +
         "\n)\n";
}

std::string GlewlwydConfig(const GlewlwydConfigOptions& o) {
  // Learned the hard way (shared/specs/dependencies.md §6): use_secure_connection demands
  // valid key and pem files; login_url is appended to external_url; log_mode "console" into a
  // redirected file is reliable where "file" was not.
  std::string port = std::to_string(o.port);
  std::string config = "port=" + port +
                       "\nbind_address=\"127.0.0.1\"\n"
                       "external_url=\"https://127.0.0.1:" +
                       port +
                       "\"\n"
                       "login_url=\"login.html\"\n"
                       "api_prefix=\"api\"\n"
                       "log_mode=\"console\"\n"
                       "log_level=\"" +
                       o.log_level +
                       "\"\n"
                       "cookie_secure=1\n"
                       "session_expiration=3600\n"
                       "session_key=\"GLEWLWYD2_SESSION_ID\"\n"
                       "admin_scope=\"g_admin\"\n"
                       "profile_scope=\"g_profile\"\n"
                       "login_api_enabled=true\n"
                       "user_module_path=\"/usr/lib/glewlwyd/user\"\n"
                       "client_module_path=\"/usr/lib/glewlwyd/client\"\n"
                       "user_auth_scheme_module_path=\"/usr/lib/glewlwyd/scheme\"\n"
                       "plugin_module_path=\"/usr/lib/glewlwyd/plugin\"\n"
                       "use_secure_connection=true\n"
                       "secure_connection_key_file=\"" +
                       (o.dir / "tls.key").string() + "\"\nsecure_connection_pem_file=\"" +
                       (o.dir / "tls.crt").string() +
                       "\"\n"
                       "hash_algorithm=\"SHA512\"\n"
                       "database = { type = \"sqlite3\" path = \"" +
                       (o.dir / "glewlwyd.db").string() + "\" }\n";
  if (!o.webapp.empty()) config += GlewlwydWebappConfig(o.webapp);
  return config;
}

}  // namespace klutch::sandbox
