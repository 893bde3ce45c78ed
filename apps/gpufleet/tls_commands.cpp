// `gpufleet tls init` and `gpufleet tls issue`: a private CA for a fleet that has none, the
// controller's certificate, and agents' client certificates. Local files only, no server.

#include <CLI/CLI.hpp>
#include <cstdio>
#include <ctime>

#include "apps/gpufleet/daemons.h"
#include "cli/cli.h"
#include "net/certs.h"

namespace gpufleet::app {
namespace {

std::string Day(int64_t unix_s) {
  char buf[32];
  std::time_t t = unix_s;
  std::strftime(buf, sizeof buf, "%Y-%m-%d", std::gmtime(&t));
  return buf;
}

}  // namespace

void AddTlsCommands(CLI::App& app, cli::Globals& g) {
  auto* tls = app.add_subcommand("tls", "Make a private CA and certificates for TLS");
  tls->require_subcommand(1);

  static std::string dir;
  static std::vector<std::string> hosts;
  static bool force = false;
  auto* init = tls->add_subcommand(
      "init", "Make a CA and the controller's certificate (ECDSA P-256) in a directory");
  init->add_option("--dir", dir, "where to write ca.pem, ca.key, controller.pem, controller.key")
      ->required();
  init->add_option("--host", hosts,
                   "a DNS name or IP address agents and users reach the controller by "
                   "(repeat for each)")
      ->required();
  init->add_flag("--force", force, "replace existing files (and the CA)");
  init->callback([&g] {
    auto files = net::InitTls(dir, hosts, force);
    if (!files.ok()) {
      g.exit_code = Fail(files.error());
      return;
    }
    auto info = net::ReadCert(files->cert);
    std::string names, until;
    if (info.ok()) {
      for (const auto& n : info->names) names += (names.empty() ? "" : ", ") + n;
      until = Day(info->not_after_s);
    }
    std::printf(
        "wrote %s (the CA; keep %s safe: it signs certificates)\n"
        "wrote %s for %s, valid until %s, and its key %s\n\n"
        "Serve with:    gpufleet serve --tls-cert %s --tls-key %s --listen 0.0.0.0:8443\n"
        "Agents:        gpufleet --ca-file %s agent --controller https://%s:8443 ...\n"
        "CLI:           export GPUFLEET_CA_FILE=%s GPUFLEET_SERVER=https://%s:8443\n"
        "Client certs:  gpufleet tls issue --dir %s --name NODE (with serve --client-ca %s)\n",
        files->ca_cert.c_str(), files->ca_key.c_str(), files->cert.c_str(), names.c_str(),
        until.c_str(), files->key.c_str(), files->cert.c_str(), files->key.c_str(),
        files->ca_cert.c_str(), hosts.front().c_str(), files->ca_cert.c_str(),
        hosts.front().c_str(), dir.c_str(), files->ca_cert.c_str());
  });

  static std::string issue_dir, name;
  static int days = 825;
  auto* issue = tls->add_subcommand(
      "issue", "Sign a client certificate for an agent with the CA that `tls init` made");
  issue->add_option("--dir", issue_dir, "the directory of `tls init`")->required();
  issue->add_option("--name", name, "the certificate's name (the node's, say)")->required();
  issue->add_option("--days", days, "validity in days (default 825)")->check(CLI::Range(1, 3650));
  issue->callback([&g] {
    auto files = net::TlsFiles::In(issue_dir);
    net::CertRequest req;
    req.common_name = name;
    req.server = false;
    req.not_after_s = int64_t{days} * 86400;
    if (name.empty() || name.find('/') != std::string::npos) {
      g.exit_code = Fail(MakeError(ErrorCode::kInvalidArgument, "--name must not contain '/'"));
      return;
    }
    std::string cert = issue_dir + "/" + name + ".pem", key = issue_dir + "/" + name + ".key";
    if (auto s = net::IssueCert(files.ca_cert, files.ca_key, req, cert, key); !s.ok()) {
      g.exit_code = Fail(s.error());
      return;
    }
    std::printf(
        "wrote %s and its key %s\nAgent:  gpufleet agent --client-cert %s --client-key %s ...\n",
        cert.c_str(), key.c_str(), cert.c_str(), key.c_str());
  });
}

}  // namespace gpufleet::app
