// The CPU's flags as the kernel lists them in /proc/cpuinfo: the oracle for
// which CPU kernel must run, independent of the cpuid calls under test.
#pragma once

#include <fstream>
#include <set>
#include <sstream>
#include <string>

namespace rlcore_test {

inline std::set<std::string> cpu_flags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  std::set<std::string> flags;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    for (std::string word; words >> word;) flags.insert(word);
    break;
  }
  return flags;
}

}  // namespace rlcore_test
