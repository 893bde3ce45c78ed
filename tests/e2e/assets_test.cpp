// The asset register on a live controller: GPUs discovered from real agents (simulated
// backend), a GPU moved from one node to another followed by its serial, imports and exports in
// NetBox's columns through the CLI and the API, lifecycle steps, and bad files refused whole.

#include <chrono>
#include <csignal>
#include <thread>

#include "fixture.h"

namespace gpufleet::e2e {
namespace {

class Assets : public E2E {
 protected:
  // `gpufleet agent --backend sim` as node `name`, with its own state directory (so that a
  // restart comes back with its node credential).
  Process& Agent(const std::string& token, const std::string& name, int gpus,
                 const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args{GPUFLEET_BIN,   "agent",
                                  "--controller", controller_->address(),
                                  "--join-token", token,
                                  "--backend",    "sim",
                                  "--hostname",   name,
                                  "--sim-gpus",   std::to_string(gpus),
                                  "--state-dir",  dir_ + "/" + name};
    args.insert(args.end(), extra.begin(), extra.end());
    agents_.push_back(std::make_unique<Process>(
        args, std::map<std::string, std::string>{},
        dir_ + "/" + name + "-" + std::to_string(agents_.size()) + ".log"));
    return *agents_.back();
  }
  json::value Asset(const std::string& id) {
    auto [s, v] = controller_->Call("GET", "/api/v1/assets/" + id);
    EXPECT_EQ(s, 200) << id << ": " << v;
    return v;
  }
  std::string Write(const std::string& name, const std::string& text) {
    std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
};

int64_t N(const json::value& v) { return v.to_number<int64_t>(); }

TEST_F(Assets, AGpuMovedBetweenNodesKeepsItsHistoryAndImportsRoundTrip) {
  Apply();
  std::string token = JoinToken("h100-quad");
  Agent(token, "mv-a", 4);
  Agent(token, "mv-b", 4);
  ASSERT_TRUE(WaitState("mv-a", "ready"));
  ASSERT_TRUE(WaitState("mv-b", "ready"));
  // Discovery: both nodes and their eight GPUs, within the monitor's five seconds.
  ASSERT_TRUE(WaitFor(
      [&] {
        return controller_->Call("GET", "/api/v1/assets?kind=gpu")
                   .second.at("total")
                   .to_number<int64_t>() == 8;
      },
      15000));
  std::string moved(Node("mv-a").at("gpus").at(3).at("serial").as_string());
  std::string b0(Node("mv-b").at("gpus").at(0).at("serial").as_string());
  auto a = Asset(moved);
  EXPECT_EQ(a.at("node"), "mv-a");
  EXPECT_EQ(N(a.at("gpu_index")), 3);
  EXPECT_EQ(a.at("state"), "in_service");
  EXPECT_EQ(a.at("status"), "active");
  EXPECT_EQ(a.at("site"), "lab-a");  // the cluster's
  EXPECT_EQ(a.at("model"), "H100-SXM5-80GB");
  EXPECT_EQ(Asset("mv-a").at("kind"), "node");

  // What discovery cannot know, from a NetBox-style CSV: the GPU's purchase and warranty (ending
  // in 30 days), a node's rack, and a spare GPU on the shelf.
  std::string csv =
      "name,kind,serial,asset_tag,status,site,location,rack,position,purchase_date,"
      "purchase_price,warranty_end\n"
      ",gpu," +
      moved + ",GPU-0042,active,lab-a,hall-1,r07,,2024-01-10,31000," + UtcDate(30) +
      "\n"
      "mv-a,node,SRV-9,SRV-TAG-1,active,lab-a,hall-1,r07,12,2024-01-10,,\n"
      ",gpu,1652299912345,,inventory,lab-a,store-room,,,2026-06-01,,2029-06-01\n";
  auto imported = Cli({"assets", "import", Write("assets.csv", csv)});
  ASSERT_EQ(imported.exit_code, 0) << imported.err;
  EXPECT_EQ(imported.out, "3 applied: 1 created, 2 updated, 0 unchanged\n");
  EXPECT_EQ(Asset("1652299912345").at("state"), "spare");
  EXPECT_EQ(Asset("mv-a").at("position"), "12");

  // A bad file changes nothing: its good second line is not applied either.
  std::string bad = "serial,rack,warranty_end\n" + moved + ",r99,\n" + b0 + ",r1,2027-02-30\n";
  auto [bs, bv] = controller_->Call("POST", "/api/v1/assets/import", bad, nullptr, "text/csv");
  EXPECT_EQ(bs, 400);
  EXPECT_EQ(bv.at("error").at("message"),
            "line 3, field 'warranty_end': '2027-02-30' is not a date (YYYY-MM-DD)");
  EXPECT_EQ(Asset(moved).at("rack"), "r07");
  auto unknown = Cli({"assets", "import", Write("bad.csv", "serial,owner\n1,me\n")});
  EXPECT_NE(unknown.exit_code, 0);
  EXPECT_NE(unknown.err.find("line 1, field 'owner': unknown column"), std::string::npos)
      << unknown.err;
  auto [us, uv] =
      controller_->Call("POST", "/api/v1/assets/import", "serial\n1\n", nullptr, "text/plain");
  EXPECT_EQ(us, 400) << uv;

  // The technician moves GPU 3 of mv-a into slot 0 of mv-b (mv-b's own GPU 0 goes on the
  // shelf): both agents restart with what they have now.
  for (auto& p : agents_) {
    p->Signal(SIGTERM);
    EXPECT_EQ(p->Wait(10000), 0);
  }
  Agent(token, "mv-a", 3);
  Agent(token, "mv-b", 4, {"--sim-gpu-from", "0=mv-a:3"});
  ASSERT_TRUE(WaitFor([&] { return Asset(moved).at("node") == "mv-b"; }, 20000)) << Asset(moved);
  a = Asset(moved);
  EXPECT_EQ(N(a.at("gpu_index")), 0);
  EXPECT_EQ(a.at("name"), "mv-b/gpu0");
  EXPECT_EQ(a.at("state"), "in_service");
  EXPECT_EQ(a.at("asset_tag"), "GPU-0042");  // the same asset, with what was imported
  EXPECT_EQ(a.at("purchase_date"), "2024-01-10");
  EXPECT_EQ(N(a.at("warranty_days_left")), 30);
  std::vector<std::string> kinds;
  bool moved_to_b = false;
  for (const auto& e : a.at("history").as_array()) {
    kinds.emplace_back(e.at("kind").as_string());
    moved_to_b = moved_to_b || (e.at("kind") == "moved" && e.at("from") == "mv-a:3" &&
                                e.at("to") == "mv-b:0" && e.at("actor") == "discovery");
  }
  EXPECT_TRUE(moved_to_b) << a.at("history");
  ASSERT_GE(kinds.size(), 3u);
  EXPECT_EQ(kinds[0], "discovered");
  EXPECT_EQ(kinds[1], "edited");  // the import
  ASSERT_TRUE(WaitFor([&] { return Asset(b0).at("state") == "spare"; }, 10000));
  EXPECT_EQ(Asset(b0).at("last_node"), "mv-b:0");

  // Lifecycle: into RMA with its number, through the CLI.
  auto rma = Cli({"assets", "set-state", moved, "rma", "--note", "RMA-7: row remap failures"});
  ASSERT_EQ(rma.exit_code, 0) << rma.err;
  EXPECT_EQ(rma.out, moved + " is rma\n");
  auto show = Cli({"assets", "show", moved});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_NE(show.out.find("RMA-7: row remap failures"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("mv-a:3"), std::string::npos) << show.out;
  auto [ss, sv] =
      controller_->Call("POST", "/api/v1/assets/" + moved + "/state", R"({"state": "broken"})");
  EXPECT_EQ(ss, 400) << sv;
  EXPECT_EQ(controller_->Call("POST", "/api/v1/assets/nope/state", R"({"state": "spare"})").first,
            404);
  EXPECT_NE(Cli({"assets", "set-state", moved, "broken"}).exit_code, 0);
  // The monitor's next looks at the fleet do not undo it.
  std::this_thread::sleep_for(std::chrono::seconds(6));
  EXPECT_EQ(Asset(moved).at("state"), "rma");

  // Export and import back: nothing changes, in CSV and in JSON.
  auto exported = Cli({"assets", "export"});
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  EXPECT_EQ(exported.out.substr(0, exported.out.find('\n')),
            "name,kind,serial,asset_tag,status,site,location,rack,position,gpu_uuid,model,"
            "part_number,purchase_date,purchase_price,warranty_end,comments");
  EXPECT_NE(exported.out.find("mv-b/gpu0,gpu," + moved + ",GPU-0042,failed,lab-a,hall-1,r07,,"),
            std::string::npos)
      << exported.out;
  auto again = Cli({"assets", "import", Write("export.csv", exported.out)});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(again.out, "0 applied: 0 created, 0 updated, 11 unchanged\n");  // 2 nodes, 9 GPUs
  auto as_json = controller_->Call("GET", "/api/v1/assets/export?format=json").second;
  auto [js, jv] = controller_->Call("POST", "/api/v1/assets/import", json::serialize(as_json));
  ASSERT_EQ(js, 200) << jv;
  EXPECT_EQ(N(jv.at("applied")), 0);
  EXPECT_EQ(N(jv.at("unchanged")), 11);

  // The summary: counts, the warranty ending in 30 days, the GPUs' ages.
  auto [sums, sum] = controller_->Call("GET", "/api/v1/assets/summary");
  ASSERT_EQ(sums, 200) << sum;
  EXPECT_EQ(N(sum.at("gpus").at("total")), 9);
  EXPECT_EQ(N(sum.at("gpus").at("by_state").at("rma")), 1);
  EXPECT_EQ(N(sum.at("gpus").at("by_state").at("spare")), 2);  // mv-b's old GPU 0, the shelf's
  EXPECT_EQ(N(sum.at("nodes").at("total")), 2);
  ASSERT_EQ(sum.at("warranty_expiring").as_array().size(), 1u);
  EXPECT_EQ(sum.at("warranty_expiring").at(0).at("id").as_string(), moved);
  EXPECT_EQ(N(sum.at("gpu_age").at("<1y")), 1);
  auto cli_summary = Cli({"assets", "summary"});
  ASSERT_EQ(cli_summary.exit_code, 0) << cli_summary.err;
  EXPECT_NE(cli_summary.out.find("ending within 90 days: 1"), std::string::npos) << cli_summary.out;

  // Every change is audited; a token limited to another cluster sees none of these assets and
  // changes none.
  auto audit = controller_->Call("GET", "/api/v1/audit?target=assets").second;
  EXPECT_GE(audit.at("items").as_array().size(), 3u) << audit;
  auto [ts, tv] =
      controller_->Call("POST", "/api/v1/api-tokens",
                        R"({"name": "edge-ops", "role": "operator", "clusters": ["edge"]})");
  ASSERT_EQ(ts, 201) << tv;
  std::string edge(tv.at("token").as_string());
  EXPECT_EQ(N(controller_->Call("GET", "/api/v1/assets", "", &edge).second.at("total")), 0);
  EXPECT_EQ(controller_->Call("GET", "/api/v1/assets/" + moved, "", &edge).first, 404);
  EXPECT_EQ(controller_
                ->Call("POST", "/api/v1/assets/" + moved + "/state", R"({"state": "spare"})", &edge)
                .first,
            403);
}

}  // namespace
}  // namespace gpufleet::e2e
