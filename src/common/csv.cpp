#include "common/csv.h"

namespace gpufleet {

Result<std::vector<CsvRow>> ParseCsv(std::string_view text) {
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
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

void AppendCsvField(std::string& out, std::string_view field) {
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
