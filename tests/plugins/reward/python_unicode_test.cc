// python_lower() and python_isalnum() against Python's own str.lower() and
// str.isalnum() over every code point (reference/python_str_methods.py), so the
// generated tables (scripts/gen_python_unicode_tables.py) are checked, not trusted.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "python_unicode.h"
#include "../../common/reference_python.h"

namespace fs = std::filesystem;
using rlcore::reward::append_utf8;
using rlcore::reward::python_isalnum;
using rlcore::reward::python_lower;

namespace {

std::string read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

fs::path scratch_dir() {
  const fs::path dir = fs::temp_directory_path() / ("rlcore_python_unicode_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir;
}

}  // namespace

TEST_CASE("python_lower lowers every code point as Python's str.lower() does") {
  // Every scalar value on its own line, then words where a capital sigma ends or starts one.
  std::string text;
  for (char32_t c = 1; c < 0x110000; ++c) {
    if (c >= 0xD800 && c <= 0xDFFF) continue;
    append_utf8(c, text);
    text += '\n';
  }
  text += "ΟΔΟΣ ΣΑΣ Σ ΑΣ. ΣΑ ΟΔΟΣ2 ΟΔΟΣ_ ÉΣ";
  const fs::path dir = scratch_dir();
  std::ofstream(dir / "in.txt", std::ios::binary) << text;
  rlcore_test::run_reference(rlcore_test::reference_script("plugins/reward/reference/python_str_methods.py"),
                             {"lower", (dir / "in.txt").string(), (dir / "out.txt").string()});
  const std::string expected = read_all(dir / "out.txt");
  const std::string lowered = python_lower(text);
  fs::remove_all(dir);
  REQUIRE(lowered.size() == expected.size());
  CHECK(lowered == expected);
}

TEST_CASE("python_isalnum holds exactly where Python's str.isalnum() does") {
  const fs::path dir = scratch_dir();
  rlcore_test::run_reference(rlcore_test::reference_script("plugins/reward/reference/python_str_methods.py"),
                             {"isalnum", (dir / "ranges.json").string()});
  const nlohmann::json ranges = nlohmann::json::parse(read_all(dir / "ranges.json"));
  fs::remove_all(dir);
  REQUIRE(ranges.size() > 100);
  char32_t next = 0;
  size_t mismatches = 0;
  for (const nlohmann::json& range : ranges) {
    const auto first = range[0].get<char32_t>(), last = range[1].get<char32_t>();
    for (char32_t c = next; c < first; ++c) mismatches += python_isalnum(c);
    for (char32_t c = first; c <= last; ++c) mismatches += !python_isalnum(c);
    next = last + 1;
  }
  for (char32_t c = next; c < 0x110000; ++c) mismatches += python_isalnum(c);
  CHECK(mismatches == 0);
}
