// The files glewlwyd (Debian's 2.7 package) needs beyond its database, shared by the sandbox's
// IdentityProvider and the tests' OidcProvider:
//  - its web app (login page) with a config.json of our own: Debian's links config.json to
//    /etc/glewlwyd/config-2.7.json, which bookworm's package installs as a directory, so glewlwyd
//    answers 404 and the login page never leaves "Loading...";
//  - the glewlwyd.conf lines that serve that copy.
// Thread-compatible (writes files).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "core/status.h"

namespace klutch::sandbox {

// Copies Debian's web app to `dir` (replacing what is there; copies, not links, so the
// directory can be handed to the glewlwyd user) and writes its config.json. kInternal naming
// the path when the app is missing or a copy fails.
core::Status WriteGlewlwydWebapp(const std::filesystem::path& dir);

// The glewlwyd.conf lines (static_files_path, static_files_mime_types) serving `dir` at the
// root of the server.
std::string GlewlwydWebappConfig(const std::filesystem::path& dir);

struct GlewlwydConfigOptions {
  uint16_t port = 0;             // on 127.0.0.1, HTTPS
  std::filesystem::path dir;     // holds tls.crt, tls.key and glewlwyd.db
  std::filesystem::path webapp;  // a WriteGlewlwydWebapp copy to serve; empty: none
  std::string log_level = "WARNING";
};
// The whole glewlwyd.conf: HTTPS on the loopback address with the certificate of `dir`, the
// login API on, the SQLite database of `dir`, Debian's module paths, log to the console.
std::string GlewlwydConfig(const GlewlwydConfigOptions& options);

}  // namespace klutch::sandbox
