#pragma once
// A real PostgreSQL server for tests: initdb into a temporary directory and pg_ctl start,
// listening only on a Unix socket in that directory (no TCP port at all). As root (CI) the
// server runs as Debian's `postgres` user, since PostgreSQL refuses to run as root. Stopped and
// removed by the destructor. Not thread-safe; one per test binary is enough.

#include <string>

namespace gpufleet::testing {

class TestPostgres {
 public:
  // Starts the server; ok() says whether it did and error() why not.
  TestPostgres();
  ~TestPostgres();
  TestPostgres(const TestPostgres&) = delete;
  TestPostgres& operator=(const TestPostgres&) = delete;

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }

  // Creates an empty database and returns its postgresql:// URI.
  std::string CreateDatabase(const std::string& name);
  // The URI of a database (which need not exist), as `user` ("name" or "name:password").
  std::string Url(const std::string& database, const std::string& user = "gpufleet") const;
  // A role that must give its password; every other one is trusted on the socket.
  static constexpr const char* kPasswordUser = "withpassword";
  static constexpr const char* kPassword = "s3cret-pw";
  // Runs one SQL statement in `database` through psql; false (and the output in error()) when
  // it fails.
  bool Sql(const std::string& database, const std::string& statement);
  // Stops the server (fast shutdown: open connections are cut) and starts it again.
  bool Stop();
  bool Start();

 private:
  // Output appended to the log; as the server's user unless `as_server` is false.
  bool Run(const std::string& command, bool as_server = true);
  std::string bin_;  // /usr/lib/postgresql/N/bin
  std::string dir_;  // the temporary directory: data/, the socket, log
  std::string as_;   // "runuser -u postgres -- " as root, "" otherwise
  std::string error_;
  int port_ = 0;  // names the socket file; nothing listens on TCP
};

// The one server of this test binary, started on first use.
TestPostgres& SharedPostgres();

}  // namespace gpufleet::testing
