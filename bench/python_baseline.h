// Running a Python baseline script from a benchmark: shell quoting and one
// JSON object read from the script's stdout. A failure is a warning and
// nullopt, so a table still prints without the baseline's column.
#pragma once

#include <cstdio>
#include <iostream>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace rlcore::bench {

inline std::string shell_quote(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Runs `command` (a shell line) and parses its stdout as JSON; `who` prefixes the warning.
inline std::optional<nlohmann::json> run_python_json(const std::string& command, const std::string& who) {
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    std::cerr << who << ": cannot run the baseline: " << command << "\n";
    return std::nullopt;
  }
  std::string output;
  char buffer[4096];
  while (size_t n = std::fread(buffer, 1, sizeof(buffer), pipe)) output.append(buffer, n);
  const int status = pclose(pipe);
  try {
    if (status != 0) throw std::runtime_error("exit status " + std::to_string(status));
    return nlohmann::json::parse(output);
  } catch (const std::exception& e) {
    std::cerr << who << ": baseline failed (" << e.what() << "): " << command << "\n";
    return std::nullopt;
  }
}

}  // namespace rlcore::bench
