#pragma once
// CSV as RFC 4180 has it: fields separated by commas, rows by CRLF or LF, a field with a comma,
// a quote or a line break in double quotes with its quotes doubled. What the CSV exports write
// and the imports read.

#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace gpufleet {

struct CsvRow {
  int line = 0;  // the line (from 1) the row starts on, for error messages
  std::vector<std::string> fields;
};

// Every row, the header included; blank lines are skipped. An unterminated quote or a quote in
// the middle of an unquoted field is an error naming its line. A UTF-8 byte order mark at the
// start is ignored (spreadsheets write one).
Result<std::vector<CsvRow>> ParseCsv(std::string_view text);

// Appends `field`, quoted when it must be. A field a spreadsheet would run as a formula (one
// that starts with =, +, @, a tab or a carriage return, or with - and is not a number) gets a
// leading ' (OWASP's advice for CSV injection), which UnguardCsvField takes off again; so does a
// field that already starts with ' (or several) and such a character, so that it reads back.
void AppendCsvField(std::string& out, std::string_view field);
// A field as read back from a file this project wrote: the ' put before a formula character
// (or before more ' and one) taken off.
std::string UnguardCsvField(std::string field);

}  // namespace gpufleet
