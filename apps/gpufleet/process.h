#pragma once
// What every long-running subcommand of gpufleet and the portable gpufleet-agent share: stop
// signals, log settings, a client's TLS context and the one-line error.

#include <csignal>
#include <string>

#include "common/result.h"
#include "net/tls.h"

namespace gpufleet::cli {
struct Globals;
}

namespace gpufleet::app {

// Blocks SIGINT and SIGTERM (and SIGHUP for a controller, which reloads its certificate on
// it) in this thread and every thread started after it, so that WaitForSignal() alone
// receives them.
sigset_t BlockStopSignals(bool hup = false);
int WaitForSignal(const sigset_t& set);
// The log level and pattern; the soft open-file limit raised to the hard one.
void SetLogLevel(const std::string& level);
// The TLS context of a client of `url` (null for http://): --ca-file, $GPUFLEET_CA_FILE or the
// system's store, and a client certificate when given.
Result<net::TlsContext> ClientContext(const std::string& url, const cli::Globals& g,
                                      const std::string& cert = "", const std::string& key = "");
// Prints "error: MESSAGE" to stderr; returns the exit code 1.
int Fail(const Error& e);

}  // namespace gpufleet::app
