// TLS end to end: `gpufleet tls init`, a controller serving HTTPS and WSS on its one port, the
// CLI, the simulator and an agent trusting its CA, SIGHUP re-reading the certificate, agents'
// client certificates, and plain HTTP refused off loopback.

#include <csignal>
#include <filesystem>

#include "fixture.h"

namespace gpufleet::e2e {
namespace {

class Tls : public E2E {
 protected:
  // The controller starts with a certificate that `gpufleet tls init` made in DATA_DIR/tls.
  std::vector<std::string> ControllerFlags() override {
    std::string tls = dir_ + "/data/tls";
    auto r =
        RunGpufleet({"tls", "init", "--dir", tls, "--host", "127.0.0.1", "--host", "localhost"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(
        r.out.find("--tls-cert " + tls + "/controller.pem --tls-key " + tls + "/controller.key"),
        std::string::npos)
        << r.out;
    return {"--tls-cert", tls + "/controller.pem", "--tls-key", tls + "/controller.key"};
  }
  std::string Ca() const { return controller_->data_dir() + "/tls/ca.pem"; }
  // "127.0.0.1:PORT" of the https:// address.
  std::string HostPort() const { return controller_->address().substr(8); }
};

TEST_F(Tls, TheApiTheCliAndTheSimulatorWorkOverHttps) {
  ASSERT_EQ(controller_->address().rfind("https://127.0.0.1:", 0), 0u) << controller_->address();
  Apply();  // the CLI, with --data-dir: its controller.addr is https://, its tls/ca.pem trusted
  Sim(JoinToken("h100"), "tls", 2, "H100-SXM5-80GB", 8);
  EXPECT_TRUE(WaitState("tls-0000", "ready")) << State("tls-0000");
  EXPECT_TRUE(WaitState("tls-0001", "ready"));
  auto [status, nodes] = controller_->Call("GET", "/api/v1/nodes");
  EXPECT_EQ(status, 200);
  EXPECT_EQ(nodes.at("items").as_array().size(), 2u);

  // The CLI told only the address checks the certificate against the system's store: refused
  // in one line, exit 1.
  auto bare =
      RunGpufleet({"--server", controller_->address(), "--token", "gft_x", "nodes", "list"});
  EXPECT_EQ(bare.exit_code, 1);
  EXPECT_NE(bare.err.find("TLS: certificate verify failed: unable to get local issuer certificate"),
            std::string::npos)
      << bare.err;
  EXPECT_EQ(std::count(bare.err.begin(), bare.err.end(), '\n'), 1) << bare.err;
  // With the CA from the environment, or --ca-file, it works.
  auto env = RunGpufleet(
      {"--server", controller_->address(), "--token", controller_->admin_token(), "nodes", "list"},
      {{"GPUFLEET_CA_FILE", Ca()}});
  EXPECT_EQ(env.exit_code, 0) << env.err;
  EXPECT_NE(env.out.find("tls-0001"), std::string::npos) << env.out;
  auto flag = RunGpufleet({"--ca-file", Ca(), "--server",
                           "https://localhost:" + HostPort().substr(HostPort().rfind(':') + 1),
                           "--token", controller_->admin_token(), "nodes", "list"});
  EXPECT_EQ(flag.exit_code, 0) << flag.err;
  // Plain HTTP to the TLS port gets a plain answer that says what is wrong.
  auto plain =
      RunGpufleet({"--server", "http://" + HostPort(), "--token", "gft_x", "nodes", "list"});
  EXPECT_EQ(plain.exit_code, 1);
  EXPECT_NE(plain.err.find("this port speaks https://, not http://"), std::string::npos)
      << plain.err;
}

TEST_F(Tls, SighupRereadsTheCertificateForNewConnections) {
  std::string tls = controller_->data_dir() + "/tls";
  std::filesystem::copy_file(tls + "/ca.pem", dir_ + "/old-ca.pem");
  auto call = [&](const std::string& ca, std::string address = "") {
    net::TlsClientOptions o;
    o.ca_file = ca;
    cli::HttpClient client(address.empty() ? controller_->address() : address,
                           controller_->admin_token(), o);
    auto r = client.Send("GET", "/api/v1/clusters");
    return r.ok() ? std::to_string(r->status) : r.error().message;
  };
  EXPECT_EQ(call(dir_ + "/old-ca.pem"), "200");
  // A new CA and certificate in the same files: the controller serves the old ones until told.
  auto r = RunGpufleet({"tls", "init", "--dir", tls, "--host", "127.0.0.1", "--force"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(call(tls + "/ca.pem").find("certificate verify failed"), std::string::npos);
  EXPECT_EQ(call(dir_ + "/old-ca.pem"), "200");
  controller_->Signal(SIGHUP);
  EXPECT_TRUE(WaitFor([&] { return call(tls + "/ca.pem") == "200"; }, 5000))
      << call(tls + "/ca.pem");
  EXPECT_NE(call(dir_ + "/old-ca.pem").find("certificate verify failed"), std::string::npos);
  // The new certificate names 127.0.0.1 only: `localhost` no longer matches it.
  std::string port = HostPort().substr(HostPort().rfind(':') + 1);
  EXPECT_NE(call(tls + "/ca.pem", "https://localhost:" + port)
                .find("TLS: certificate verify failed: hostname mismatch"),
            std::string::npos)
      << call(tls + "/ca.pem", "https://localhost:" + port);
}

class ClientCa : public Tls {
 protected:
  std::vector<std::string> ControllerFlags() override {
    auto flags = Tls::ControllerFlags();
    flags.insert(flags.end(), {"--client-ca", dir_ + "/data/tls/ca.pem"});
    return flags;
  }
};

TEST_F(ClientCa, AgentsMustPresentACertificateTheCliNeedNot) {
  Apply();  // the CLI has no client certificate, and needs none
  std::string token = JoinToken("h100");
  std::string tls = controller_->data_dir() + "/tls";
  auto agent = [&](const std::string& name, std::vector<std::string> extra) {
    std::vector<std::string> args{
        GPUFLEET_BIN,   "--ca-file", Ca(),           "agent",
        "--backend",    "sim",       "--controller", controller_->address(),
        "--join-token", token,       "--hostname",   name};
    args.insert(args.end(), extra.begin(), extra.end());
    agents_.push_back(std::make_unique<Process>(args, std::map<std::string, std::string>{},
                                                dir_ + "/" + name + ".log"));
  };
  agent("no-cert", {});
  auto issued = RunGpufleet({"tls", "issue", "--dir", tls, "--name", "with-cert"});
  ASSERT_EQ(issued.exit_code, 0) << issued.err;
  agent("with-cert",
        {"--client-cert", tls + "/with-cert.pem", "--client-key", tls + "/with-cert.key"});
  EXPECT_TRUE(WaitState("with-cert", "ready"));
  EXPECT_TRUE(WaitFor(
      [&] {
        return ReadFile(dir_ + "/no-cert.log").find("declined the agent channel: HTTP 403") !=
               std::string::npos;
      },
      10000))
      << ReadFile(dir_ + "/no-cert.log");
  EXPECT_EQ(State("no-cert"), "absent");
}

TEST(TlsServe, PlainHttpOffLoopbackIsRefusedUnlessAskedFor) {
  std::string dir = TempDir("plain-off-loopback");
  auto r = RunGpufleet({"--data-dir", dir, "serve", "--listen", "0.0.0.0:0"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("error: refusing plain HTTP on 0.0.0.0:0, which is not loopback: give "
                       "--tls-cert and --tls-key"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("--insecure-plaintext"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir + "/controller.addr"));
  Process served(
      {GPUFLEET_BIN, "--data-dir", dir, "serve", "--listen", "0.0.0.0:0", "--insecure-plaintext"},
      {}, dir + "/serve.log");
  EXPECT_TRUE(WaitFor([&] { return std::filesystem::exists(dir + "/controller.addr"); }, 20000))
      << ReadFile(dir + "/serve.log");
  served.Signal(SIGTERM);
  EXPECT_EQ(served.Wait(10000), 0);
  EXPECT_NE(ReadFile(dir + "/serve.log").find("--insecure-plaintext"), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpufleet::e2e
