// compat check|show|apply|reset|export: the driver compatibility matrix from the command line.

#include <CLI/CLI.hpp>

#include "cli/cli.h"
#include "cli/output.h"

namespace json = boost::json;

namespace gpufleet::cli {
namespace {

void PrintMatrix(const json::value& v) {
  std::printf("matrix: %s (today %s)\n\n", Str(v.at("origin")).c_str(), Str(v.at("today")).c_str());
  Table t({"BRANCH", "TYPE", "END OF LIFE", "CUDA MAJOR", "STATUS"});
  for (const auto& b : v.at("branches").as_array()) {
    t.Row({Str(b.at("branch")), Str(b.at("type")), b.at("eol").is_null() ? "-" : Str(b.at("eol")),
           Str(b.at("cuda_major")), Str(b.at("status"))});
  }
  t.Print();
  std::printf("\nsource: %s\n", Str(v.at("sources").at("branches")).c_str());
}

}  // namespace

void AddLifecycleCommands(CLI::App& app, Globals& g) {
  auto* compat =
      app.add_subcommand("compat", "The driver / CUDA / GPU / operator compatibility matrix");
  compat->require_subcommand(1);

  auto* check = compat->add_subcommand(
      "check", "Check a driver version against a pool's needs; exits 1 when a rule fails");
  static std::string pool, driver, cuda;
  check->add_option("--pool", pool, "pool whose needs and GPUs are checked")->required();
  check->add_option("--driver", driver, "target driver version, e.g. 580.95.05")->required();
  check->add_option("--cuda", cuda, "a CUDA version to check instead of the pool's requires.cuda");
  check->callback([&g] {
    auto v = Call(
        g, "GET",
        "/api/v1/compat/check" + QueryString({{"pool", pool}, {"driver", driver}, {"cuda", cuda}}));
    if (!v) return;
    Show(g, *v, [](const json::value& r) {
      Table t({"RESULT", "RULE", "REASON"});
      for (const auto& f : r.at("failed").as_array()) {
        t.Row({"FAIL", Str(f.at("rule")), Str(f.at("reason"))});
      }
      for (const auto& p : r.at("passed").as_array()) {
        t.Row({"pass", Str(p.at("rule")), Str(p.at("reason"))});
      }
      t.Print();
      std::printf(
          "\n%s on pool %s: %s\n", Str(r.at("driver")).c_str(), Str(r.at("pool")).c_str(),
          r.at("ok").as_bool()
              ? "compatible"
              : (std::to_string(r.at("failed").as_array().size()) + " rule(s) failed").c_str());
    });
    if (!v->at("ok").as_bool()) g.exit_code = 1;
  });

  compat->add_subcommand("show", "The branches and their status today")->callback([&g] {
    if (auto v = Call(g, "GET", "/api/v1/compat")) Show(g, *v, PrintMatrix);
  });

  auto* apply = compat->add_subcommand(
      "apply", "Replace the matrix with a file like data/compat.yaml (admin)");
  static std::string file;
  apply->add_option("-f,--filename", file, "matrix YAML file (- for stdin)")->required();
  apply->callback([&g] {
    auto text = ReadInput(g, file);
    if (!text) return;
    auto v =
        Call(g, "PUT", "/api/v1/compat" + QueryString({{"filename", file == "-" ? "stdin" : file}}),
             *text, "application/yaml");
    if (!v) return;
    Show(g, *v, [](const json::value& m) {
      std::printf(
          "compatibility matrix applied: %zu branches, %zu CUDA rows, %zu GPU Operator "
          "releases\n",
          m.at("branches").as_array().size(), m.at("cuda").as_array().size(),
          m.at("gpu_operator").as_array().size());
    });
  });

  compat->add_subcommand("reset", "Go back to the built-in matrix (admin)")->callback([&g] {
    if (auto v = Call(g, "DELETE", "/api/v1/compat")) {
      Show(g, *v,
           [](const json::value&) { std::printf("using the built-in compatibility matrix\n"); });
    }
  });

  compat->add_subcommand("export", "Print the matrix in effect as YAML (a starting point to edit)")
      ->callback([&g] {
        if (auto v = Call(g, "GET", "/api/v1/compat/yaml")) {
          std::fputs(Str(v->at("yaml")).c_str(), stdout);
        }
      });
}

}  // namespace gpufleet::cli
