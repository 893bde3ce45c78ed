#include "net/certs.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <memory>

namespace gpufleet::net {
namespace {

template <class T, void (*F)(T*)>
struct Deleter {
  void operator()(T* p) const { F(p); }
};
using KeyPtr = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY, EVP_PKEY_free>>;
using CertPtr = std::unique_ptr<X509, Deleter<X509, X509_free>>;
using BioPtr = std::unique_ptr<BIO, Deleter<BIO, BIO_free_all>>;

std::string OpenSslError(const std::string& what) {
  unsigned long e = ERR_get_error();
  ERR_clear_error();
  char buf[256] = "unknown error";
  if (e != 0) ERR_error_string_n(e, buf, sizeof buf);
  return what + ": " + buf;
}

bool IsIp(const std::string& host) {
  unsigned char buf[16];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

// Writes `data` to `path` with `mode`, replacing the file (and its mode) if it exists.
Status WriteFile(const std::string& path, const std::string& data, mode_t mode) {
  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return MakeError(ErrorCode::kInvalidArgument, "cannot write " + path);
  bool ok = ::fchmod(fd, mode) == 0 &&
            ::write(fd, data.data(), data.size()) == static_cast<ssize_t>(data.size());
  ok = ::close(fd) == 0 && ok;
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return MakeError(ErrorCode::kInvalidArgument, "cannot write " + path);
  }
  return {};
}

std::string BioText(BIO* bio) {
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<size_t>(n));
}

Status WritePem(const std::string& cert_path, X509* cert, const std::string& key_path,
                EVP_PKEY* key) {
  BioPtr cert_bio(BIO_new(BIO_s_mem()));
  BioPtr key_bio(BIO_new(BIO_s_mem()));
  if (PEM_write_bio_X509(cert_bio.get(), cert) != 1 ||
      PEM_write_bio_PrivateKey(key_bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return MakeError(ErrorCode::kInternal, OpenSslError("cannot encode the certificate"));
  }
  GF_TRY(WriteFile(key_path, BioText(key_bio.get()), 0600));
  return WriteFile(cert_path, BioText(cert_bio.get()), 0644);
}

Status AddExt(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (!ext) return MakeError(ErrorCode::kInvalidArgument, OpenSslError("bad extension " + value));
  int ok = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  if (ok != 1) return MakeError(ErrorCode::kInternal, OpenSslError("cannot add " + value));
  return {};
}

// A certificate for a fresh P-256 key; self-signed when `issuer` is null.
Result<std::pair<CertPtr, KeyPtr>> Make(const std::string& common_name, int64_t not_before_s,
                                        int64_t not_after_s, X509* issuer, EVP_PKEY* issuer_key) {
  KeyPtr key(EVP_EC_gen("P-256"));
  CertPtr cert(X509_new());
  if (!key || !cert) return MakeError(ErrorCode::kInternal, OpenSslError("cannot make a key"));
  X509_set_version(cert.get(), 2);
  std::unique_ptr<BIGNUM, Deleter<BIGNUM, BN_free>> serial(BN_new());
  BN_rand(serial.get(), 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY);
  BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get()));
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), static_cast<long>(not_before_s));
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), static_cast<long>(not_after_s));
  X509_set_pubkey(cert.get(), key.get());
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8,
                             reinterpret_cast<const unsigned char*>("gpufleet"), -1, -1, 0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                             reinterpret_cast<const unsigned char*>(common_name.c_str()), -1, -1,
                             0);
  X509_set_issuer_name(cert.get(), issuer ? X509_get_subject_name(issuer) : name);
  return std::make_pair(std::move(cert), std::move(key));
}

Status Sign(X509* cert, EVP_PKEY* key) {
  if (X509_sign(cert, key, EVP_sha256()) == 0) {
    return MakeError(ErrorCode::kInternal, OpenSslError("cannot sign the certificate"));
  }
  return {};
}

}  // namespace

Status MakeCa(const std::string& cert_path, const std::string& key_path,
              const std::string& common_name, int64_t valid_s) {
  auto made = Make(common_name, -300, valid_s, nullptr, nullptr);
  if (!made.ok()) return made.error();
  X509* cert = made->first.get();
  GF_TRY(AddExt(cert, cert, NID_basic_constraints, "critical,CA:TRUE,pathlen:0"));
  GF_TRY(AddExt(cert, cert, NID_key_usage, "critical,keyCertSign,cRLSign"));
  GF_TRY(AddExt(cert, cert, NID_subject_key_identifier, "hash"));
  GF_TRY(Sign(cert, made->second.get()));
  return WritePem(cert_path, cert, key_path, made->second.get());
}

Status IssueCert(const std::string& ca_cert, const std::string& ca_key, const CertRequest& req,
                 const std::string& cert_path, const std::string& key_path) {
  BioPtr cert_in(BIO_new_file(ca_cert.c_str(), "r"));
  CertPtr ca(cert_in ? PEM_read_bio_X509(cert_in.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!ca) return MakeError(ErrorCode::kInvalidArgument, OpenSslError("cannot read " + ca_cert));
  BioPtr key_in(BIO_new_file(ca_key.c_str(), "r"));
  KeyPtr signer(key_in ? PEM_read_bio_PrivateKey(key_in.get(), nullptr, nullptr, nullptr)
                       : nullptr);
  if (!signer) return MakeError(ErrorCode::kInvalidArgument, OpenSslError("cannot read " + ca_key));
  if (X509_check_private_key(ca.get(), signer.get()) != 1) {
    ERR_clear_error();
    return MakeError(ErrorCode::kInvalidArgument, ca_key + " is not the key of " + ca_cert);
  }
  if (req.server && req.hosts.empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "a server certificate needs at least one --host");
  }
  auto made = Make(req.common_name, req.not_before_s, req.not_after_s, ca.get(), signer.get());
  if (!made.ok()) return made.error();
  X509* cert = made->first.get();
  GF_TRY(AddExt(cert, ca.get(), NID_basic_constraints, "critical,CA:FALSE"));
  GF_TRY(AddExt(cert, ca.get(), NID_key_usage, "critical,digitalSignature"));
  GF_TRY(AddExt(cert, ca.get(), NID_ext_key_usage, req.server ? "serverAuth" : "clientAuth"));
  GF_TRY(AddExt(cert, ca.get(), NID_subject_key_identifier, "hash"));
  GF_TRY(AddExt(cert, ca.get(), NID_authority_key_identifier, "keyid:always"));
  if (!req.hosts.empty()) {
    std::string san;
    for (const auto& h : req.hosts) {
      if (h.empty() || h.find_first_of(", \t") != std::string::npos) {
        return MakeError(ErrorCode::kInvalidArgument, "bad host name '" + h + "'");
      }
      if (!san.empty()) san += ",";
      san += (IsIp(h) ? "IP:" : "DNS:") + h;
    }
    GF_TRY(AddExt(cert, ca.get(), NID_subject_alt_name, san));
  }
  GF_TRY(Sign(cert, signer.get()));
  return WritePem(cert_path, cert, key_path, made->second.get());
}

TlsFiles TlsFiles::In(const std::string& dir) {
  return TlsFiles{dir + "/ca.pem", dir + "/ca.key", dir + "/controller.pem",
                  dir + "/controller.key"};
}

Result<TlsFiles> InitTls(const std::string& dir, const std::vector<std::string>& hosts,
                         bool replace) {
  if (hosts.empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "name at least one --host for the certificate");
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return MakeError(ErrorCode::kInvalidArgument, "cannot create " + dir + ": " + ec.message());
  TlsFiles files = TlsFiles::In(dir);
  if (!replace) {
    for (const auto& f : {files.ca_cert, files.ca_key, files.cert, files.key}) {
      if (std::filesystem::exists(f)) {
        return MakeError(ErrorCode::kConflict,
                         f + " exists; --force replaces it (and the CA: every certificate it "
                             "signed stops verifying)");
      }
    }
  }
  GF_TRY(MakeCa(files.ca_cert, files.ca_key, "gpufleet CA"));
  CertRequest req;
  req.common_name = hosts.front();
  req.hosts = hosts;
  GF_TRY(IssueCert(files.ca_cert, files.ca_key, req, files.cert, files.key));
  return files;
}

Result<CertInfo> ReadCert(const std::string& cert_path) {
  BioPtr in(BIO_new_file(cert_path.c_str(), "r"));
  CertPtr cert(in ? PEM_read_bio_X509(in.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!cert)
    return MakeError(ErrorCode::kInvalidArgument, OpenSslError("cannot read " + cert_path));
  CertInfo info;
  info.ca = X509_check_ca(cert.get()) != 0;
  auto* names = static_cast<GENERAL_NAMES*>(
      X509_get_ext_d2i(cert.get(), NID_subject_alt_name, nullptr, nullptr));
  for (int i = 0; names && i < sk_GENERAL_NAME_num(names); ++i) {
    const GENERAL_NAME* n = sk_GENERAL_NAME_value(names, i);
    if (n->type == GEN_DNS) {
      const auto* s = n->d.dNSName;
      info.names.push_back("DNS:" +
                           std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                                       static_cast<size_t>(ASN1_STRING_length(s))));
    } else if (n->type == GEN_IPADD) {
      const auto* s = n->d.iPAddress;
      char buf[64] = "";
      int len = ASN1_STRING_length(s);
      inet_ntop(len == 4 ? AF_INET : AF_INET6, ASN1_STRING_get0_data(s), buf, sizeof buf);
      info.names.push_back(std::string("IP:") + buf);
    }
  }
  GENERAL_NAMES_free(names);
  struct tm tm {};
  if (ASN1_TIME_to_tm(X509_get0_notAfter(cert.get()), &tm) == 1) info.not_after_s = timegm(&tm);
  return info;
}

}  // namespace gpufleet::net
