#include "scrape/scraper.h"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>

namespace gpufleet::scrape {
namespace {

using tcp = boost::asio::ip::tcp;

TEST(FetchPage, RefusedConnectionSaysSo) {
  // Bind a port and close it again: nothing listens there now.
  boost::asio::io_context io;
  unsigned short port;
  {
    tcp::acceptor a(io, tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0));
    port = a.local_endpoint().port();
  }
  auto r = FetchPage("http://127.0.0.1:" + std::to_string(port) + "/metrics", 2000, 1 << 20);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("connect"), std::string::npos) << r.error().message;
}

TEST(FetchPage, ASilentExporterTimesOut) {
  // A listening socket that never answers: the connection is accepted by the kernel, the reply
  // never comes. The deadline must hold.
  boost::asio::io_context io;
  tcp::acceptor a(io, tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0));
  auto started = std::chrono::steady_clock::now();
  auto r = FetchPage("http://127.0.0.1:" + std::to_string(a.local_endpoint().port()) + "/metrics",
                     300, 1 << 20);
  auto took = std::chrono::steady_clock::now() - started;
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("timed out after 300 ms"), std::string::npos)
      << r.error().message;
  EXPECT_LT(took, std::chrono::seconds(5));
}

TEST(FetchPage, RefusesOtherSchemes) {
  auto r = FetchPage("ws://127.0.0.1:9400/metrics", 1000, 1 << 20);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("only http:// and https://"), std::string::npos)
      << r.error().message;
}

TEST(Scraper, RecordsFailuresPerTarget) {
  boost::asio::io_context io;
  unsigned short port;
  {
    tcp::acceptor a(io, tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0));
    port = a.local_endpoint().port();
  }
  int sunk = 0;
  Scraper scraper(RealClock(), [&](const ScrapeTarget&, int64_t, const DcgmReading&) {
    ++sunk;
    return Status{};
  });
  scraper.SetTargets({{"n1", "p", "http://127.0.0.1:" + std::to_string(port) + "/metrics", 1000}});
  for (int i = 0; i < 100 && scraper.Targets().at(0).scrapes == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  auto t = scraper.Targets();
  ASSERT_EQ(t.size(), 1u);
  EXPECT_GE(t[0].scrapes, 1u);
  EXPECT_FALSE(t[0].up);
  EXPECT_EQ(t[0].failures, t[0].scrapes);
  EXPECT_NE(t[0].error.find("connect"), std::string::npos) << t[0].error;
  EXPECT_EQ(sunk, 0);
  scraper.SetTargets({});
  EXPECT_TRUE(scraper.Targets().empty());
}

}  // namespace
}  // namespace gpufleet::scrape
