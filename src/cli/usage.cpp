// The line a refused command line gets: what was wrong, the nearest known command where a word
// is not one, and the help to read.

#include <CLI/CLI.hpp>
#include <algorithm>
#include <vector>

#include "cli/cli.h"

namespace gpufleet::cli {
namespace {

// Levenshtein's edit distance.
size_t Distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// The command line up to `app`: "gpufleet nodes list".
std::string PathOf(const CLI::App* app) {
  std::string path;
  for (; app; app = app->get_parent()) path = app->get_name() + (path.empty() ? "" : " ") + path;
  return path;
}

// An option of `app` or of a command above it (their options fall through).
const CLI::Option* FindOption(const CLI::App* app, const std::string& name) {
  for (; app; app = app->get_parent()) {
    if (const CLI::Option* o = app->get_option_no_throw(name)) return o;
  }
  return nullptr;
}

}  // namespace

std::string UsageError(CLI::App& app, const std::vector<std::string>& args,
                       const std::string& what) {
  // Follow the words that name commands; the first word that names none where a command is
  // required is the mistake.
  const CLI::App* at = &app;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& word = args[i];
    if (word == "--") break;
    if (word.size() > 1 && word[0] == '-') {
      const std::string name = word.substr(0, word.find('='));
      const CLI::Option* o = FindOption(at, name);
      if (o && o->get_expected_min() > 0 && word.find('=') == std::string::npos) ++i;  // its value
      continue;
    }
    auto named = at->get_subcommands([&](const CLI::App* s) { return s->check_name(word); });
    if (!named.empty()) {
      at = named.front();
      continue;
    }
    auto commands = at->get_subcommands([](const CLI::App*) { return true; });
    if (commands.empty() || at->get_require_subcommand_min() == 0) break;
    std::string nearest;
    size_t best = SIZE_MAX;
    for (const CLI::App* c : commands) {
      size_t d = Distance(word, c->get_name());
      if (d < best) {
        best = d;
        nearest = c->get_name();
      }
    }
    std::string line = "unknown command '" + word + "' for '" + PathOf(at) + "'";
    // Close enough to be a typo: at most a third of the word wrong, or a prefix.
    if (best <= std::max<size_t>(1, word.size() / 3) || nearest.rfind(word, 0) == 0)
      line += ": did you mean '" + nearest + "'?";
    return line + " (see " + PathOf(at) + " --help)";
  }
  return what + " (see " + PathOf(at) + " --help)";
}

}  // namespace gpufleet::cli
