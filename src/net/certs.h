#pragma once
// A private certificate authority for a fleet that has none: `gpufleet tls init` makes the CA
// and the controller's certificate, `gpufleet tls issue` agents' client certificates. ECDSA
// P-256 keys and SHA-256 signatures through OpenSSL's API; keys are written mode 0600.

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"

namespace gpufleet::net {

struct CertRequest {
  std::string common_name;
  std::vector<std::string> hosts;  // subjectAltName: DNS names and IP addresses
  bool server = true;              // extendedKeyUsage serverAuth, else clientAuth
  // Validity, in seconds from now (negative: in the past, for tests of expired certificates).
  int64_t not_before_s = -300;
  int64_t not_after_s = 825LL * 86400;
};

// A CA certificate and key, written to `cert_path` and `key_path`.
Status MakeCa(const std::string& cert_path, const std::string& key_path,
              const std::string& common_name, int64_t valid_s = 3650LL * 86400);

// A certificate signed by the CA at `ca_cert`/`ca_key`.
Status IssueCert(const std::string& ca_cert, const std::string& ca_key, const CertRequest& req,
                 const std::string& cert_path, const std::string& key_path);

// The files `gpufleet tls init` writes under a directory.
struct TlsFiles {
  std::string ca_cert, ca_key, cert, key;
  static TlsFiles In(const std::string& dir);
};

// Makes DIR's CA and controller certificate for `hosts`. Refuses to replace existing files
// unless `replace` (a new CA invalidates every certificate it signed).
Result<TlsFiles> InitTls(const std::string& dir, const std::vector<std::string>& hosts,
                         bool replace);

// The certificate's subjectAltName entries ("DNS:a", "IP:127.0.0.1") and its notAfter as Unix
// seconds: what `tls init` prints and tests check.
struct CertInfo {
  std::vector<std::string> names;
  int64_t not_after_s = 0;
  bool ca = false;
};
Result<CertInfo> ReadCert(const std::string& cert_path);

}  // namespace gpufleet::net
