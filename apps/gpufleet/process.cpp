#include "apps/gpufleet/process.h"

#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <cstdio>

#include "cli/cli.h"
#include "common/url.h"

namespace gpufleet::app {

sigset_t BlockStopSignals(bool hup) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  if (hup) sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}

int WaitForSignal(const sigset_t& set) {
  int sig = 0;
  sigwait(&set, &sig);
  return sig;
}

// One socket per agent: raise the soft open-file limit to the hard one, as servers do.
static void RaiseFileLimit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
}

void SetLogLevel(const std::string& level) {
  RaiseFileLimit();
  spdlog::set_level(spdlog::level::from_str(level));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
}

Result<net::TlsContext> ClientContext(const std::string& url, const cli::Globals& g,
                                      const std::string& cert, const std::string& key) {
  auto parsed = ParseHttpUrls(url, "8080");  // one controller, or several of one database
  if (!parsed.ok()) {
    return MakeError(ErrorCode::kInvalidArgument, "--controller " + parsed.error().message);
  }
  bool tls = false;
  for (const auto& u : parsed.value()) tls = tls || u.tls();
  if (!tls) return net::TlsContext{};
  auto o = net::ClientOptionsFromEnv(g.ca_file, g.insecure_skip_verify);
  o.cert_file = cert;
  o.key_file = key;
  if (g.insecure_skip_verify) {
    spdlog::warn("--insecure-skip-verify: the certificate of {} is not checked", url);
  }
  return net::MakeClientContext(o);
}

int Fail(const Error& e) {
  std::fprintf(stderr, "error: %s\n", e.message.c_str());
  return 1;
}

}  // namespace gpufleet::app
