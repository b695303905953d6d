// Pki: the certificates a server process keeps in a directory: a CA, one serving certificate
// and any number of client certificates, generated on first start and reused afterwards.
//
// Files (PEM): ca.crt/ca.key, <serving>.crt/.key and <serving>.sans (the names the serving
// certificate was issued for: a different set reissues it under the same CA), and
// <client>.crt/.key per client. Keys are written 0600, certificates 0644. Used by the API
// server (apiserver + admin), and by every other server binary and the sandbox.
// Thread-compatible: one process owns a directory.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "core/status.h"
#include "http/certs.h"

namespace klutch::serving {

struct ClientCertificateSpec {
  std::string file;  // file stem: <file>.crt, <file>.key
  std::string common_name;
  std::vector<std::string> organizations;
};

struct PkiSpec {
  std::string ca_common_name = "klutch-ca";
  std::string serving_file = "server";  // file stem of the serving certificate
  std::string serving_common_name = "klutch";
  // DNS names and IP addresses the serving certificate names ("0.0.0.0", "::" and "" are
  // ignored; loopback and localhost are always included).
  std::vector<std::string> serving_names;
  std::vector<ClientCertificateSpec> clients;
};

struct Pki {
  http::Pem ca;
  std::string ca_file;
  std::string serving_cert_file, serving_key_file;
  std::vector<http::Pem> clients;  // in PkiSpec::clients order
};

// Loads what exists in `dir` and generates what is missing (creating `dir`). kInternal
// naming the file when one cannot be read or written; kBadRequest when stored PEM data does
// not parse.
core::Result<Pki> EnsurePki(const std::filesystem::path& dir, const PkiSpec& spec);

}  // namespace klutch::serving
