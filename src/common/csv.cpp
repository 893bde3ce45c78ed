#include "common/csv.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "common/utf8.h"

namespace gpufleet {

Result<std::vector<CsvRow>> ParseCsv(std::string_view text) {
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  if (size_t at = InvalidUtf8At(text); at != std::string_view::npos) {
    const auto line = 1 + std::count(text.begin(), text.begin() + static_cast<long>(at), '\n');
    return MakeError(ErrorCode::kInvalidArgument,
                     "line " + std::to_string(line) + ": the text is not UTF-8");
  }
  std::vector<CsvRow> rows;
  CsvRow row;
  std::string field;
  int line = 1;
  row.line = 1;
  bool quoted = false;      // inside a quoted field
  bool was_quoted = false;  // the current field was quoted (only a separator may follow)
  bool any = false;         // the row has something (a blank line has not)
  auto end_field = [&] {
    row.fields.push_back(std::move(field));
    field.clear();
    was_quoted = false;
  };
  auto end_row = [&] {
    if (any) {
      end_field();
      rows.push_back(std::move(row));
    }
    row = CsvRow{};
    field.clear();
    was_quoted = false;
    any = false;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (quoted) {
      if (c == '"') {
        if (i + 1 < text.size() && text[i + 1] == '"') {
          field += '"';
          ++i;
        } else {
          quoted = false;
          was_quoted = true;
        }
      } else {
        if (c == '\n') ++line;
        field += c;
      }
      continue;
    }
    if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') continue;
    if (c == '\n' || c == '\r') {
      end_row();
      row.line = ++line;
      continue;
    }
    if (!any) row.line = line;
    any = true;
    if (c == ',') {
      end_field();
    } else if (was_quoted) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "line " + std::to_string(line) +
                           ": a quoted field must end at a comma or the end of the line");
    } else if (c == '"') {
      if (!field.empty()) {
        return MakeError(ErrorCode::kInvalidArgument,
                         "line " + std::to_string(line) +
                             ": a quote inside an unquoted field (quote the whole field and "
                             "double the quote)");
      }
      quoted = true;
    } else {
      field += c;
    }
  }
  if (quoted) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "line " + std::to_string(row.line) + ": a quoted field is not closed");
  }
  end_row();
  return rows;
}

namespace {

bool FormulaChar(char c) {
  return c == '=' || c == '+' || c == '-' || c == '@' || c == '\t' || c == '\r';
}

// A number as a spreadsheet reads one: digits, a point, an exponent; nothing to compute.
bool PlainNumber(std::string_view s) {
  if (s.empty() || !std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  const std::string text(s);
  char* end = nullptr;
  std::strtod(text.c_str(), &end);
  return end == text.c_str() + text.size();
}

// Would a spreadsheet take it for a formula?
bool LooksLikeFormula(std::string_view field) {
  if (field.empty() || !FormulaChar(field[0])) return false;
  return !(field[0] == '-' && PlainNumber(field.substr(1)));
}

// A field that UnguardCsvField takes a ' off: one or more ' and then a formula character. The
// export guards it too (one more '), so that a value that starts so reads back as it was.
bool LooksGuarded(std::string_view field) {
  const size_t rest = field.find_first_not_of('\'');
  return rest > 0 && rest != std::string_view::npos && FormulaChar(field[rest]);
}

}  // namespace

std::string UnguardCsvField(std::string field) {
  if (LooksGuarded(field)) field.erase(0, 1);
  return field;
}

void AppendCsvField(std::string& out, std::string_view field) {
  std::string guarded;
  if (LooksLikeFormula(field) || LooksGuarded(field)) {
    guarded = "'" + std::string(field);
    field = guarded;
  }
  if (field.find_first_of(",\"\r\n") == std::string_view::npos) {
    out += field;
    return;
  }
  out += '"';
  for (char c : field) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
}

}  // namespace gpufleet
