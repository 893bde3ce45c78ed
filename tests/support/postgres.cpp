#include "tests/support/postgres.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace gpufleet::testing {

namespace fs = std::filesystem;

namespace {

// The newest installed server's binaries (Debian: /usr/lib/postgresql/15/bin).
std::string FindBin() {
  std::string best;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/usr/lib/postgresql", ec)) {
    if (fs::exists(e.path() / "bin" / "initdb") && e.path().string() > best) {
      best = e.path().string();
    }
  }
  return best.empty() ? "" : best + "/bin";
}

std::string Quote(const std::string& s) { return "'" + s + "'"; }

}  // namespace

TestPostgres::TestPostgres() {
  bin_ = FindBin();
  if (bin_.empty()) {
    error_ = "no PostgreSQL server under /usr/lib/postgresql (scripts/deps.sh --test installs it)";
    return;
  }
  char tmpl[] = "/tmp/gf-pg-XXXXXX";
  if (!::mkdtemp(tmpl)) {
    error_ = "mkdtemp failed";
    return;
  }
  dir_ = tmpl;
  port_ = 50000 + static_cast<int>(::getpid() % 10000);
  if (::geteuid() == 0) {
    as_ = "runuser -u postgres -- ";
    if (std::system(("chown postgres " + Quote(dir_)).c_str()) != 0) {
      error_ = "cannot give " + dir_ + " to the postgres user";
      return;
    }
  }
  // Trust on the socket only: the directory is the server user's and mode 0700. The role
  // `kPasswordUser` alone must give its password (SCRAM), so a test can be refused one.
  if (!Run(bin_ + "/initdb -D " + Quote(dir_ + "/data") +
           " -A trust -U gpufleet -E UTF8 --locale=C --no-sync")) {
    error_ = "initdb failed";
    return;
  }
  {
    const std::string hba = dir_ + "/data/pg_hba.conf";
    std::stringstream rest;
    rest << std::ifstream(hba).rdbuf();
    std::ofstream(hba) << "local all " << kPasswordUser << " scram-sha-256\n" << rest.str();
  }
  if (!Start() || !Sql("postgres", "CREATE ROLE " + std::string(kPasswordUser) +
                                       " LOGIN CREATEDB PASSWORD '" + kPassword + "'")) {
    if (error_.empty()) error_ = "pg_ctl start failed";
  }
}

TestPostgres::~TestPostgres() {
  if (!dir_.empty()) {
    (void)Run(bin_ + "/pg_ctl -D " + Quote(dir_ + "/data") + " -m immediate -w stop");
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
}

bool TestPostgres::Run(const std::string& command, bool as_server) {
  std::string full = (as_server ? as_ : "") + command + " >> " + Quote(dir_ + "/log") + " 2>&1";
  if (std::system(full.c_str()) == 0) return true;
  std::ifstream log(dir_ + "/log");
  std::stringstream text;
  text << log.rdbuf();
  std::string tail = text.str();
  if (tail.size() > 2000) tail = tail.substr(tail.size() - 2000);
  error_ = "failed: " + command + "\n" + tail;
  return false;
}

bool TestPostgres::Start() {
  // fsync off: a test server need not survive a power cut, and it makes CI's disk faster.
  return Run(bin_ + "/pg_ctl -D " + Quote(dir_ + "/data") + " -w -l " +
             Quote(dir_ + "/server.log") + " -o " +
             Quote("-k " + dir_ + " -p " + std::to_string(port_) +
                   " -c listen_addresses= -c fsync=off -c max_connections=200") +
             " start");
}

bool TestPostgres::Stop() {
  return Run(bin_ + "/pg_ctl -D " + Quote(dir_ + "/data") + " -m fast -w stop");
}

std::string TestPostgres::Url(const std::string& database, const std::string& user) const {
  return "postgresql://" + user + "@/" + database + "?host=" + dir_ +
         "&port=" + std::to_string(port_);
}

bool TestPostgres::Sql(const std::string& database, const std::string& statement) {
  // Through a file, so the SQL needs no shell quoting; the client runs as us (only the server
  // must not be root), and notices stay in the log.
  std::string file = dir_ + "/statement.sql";
  std::ofstream(file) << "SET client_min_messages = warning;\n" << statement << ";\n";
  std::string command = bin_ + "/psql -X -q -v ON_ERROR_STOP=1 -h " + Quote(dir_) + " -p " +
                        std::to_string(port_) + " -U gpufleet -d " + Quote(database) + " -f " +
                        Quote(file);
  return Run(command, /*as_server=*/false);
}

std::string TestPostgres::CreateDatabase(const std::string& name) {
  (void)Sql("postgres", "DROP DATABASE IF EXISTS " + name);
  if (!Sql("postgres", "CREATE DATABASE " + name)) return "";
  return Url(name);
}

TestPostgres& SharedPostgres() {
  static TestPostgres server;
  return server;
}

}  // namespace gpufleet::testing
