// The python tool's limits hold as root and as nobody, per call: processes,
// memory of the whole call, CPU bandwidth, file size and open files; and calls
// beside a fork bomb and a memory hog still complete.
#include <future>

#include <catch2/catch.hpp>

#include "sandbox_testing.h"

using namespace sandbox_testing;

TEST_CASE("a call's processes are bounded by its cgroup, as root too", "[sandbox][limits]") {
  const User user = GENERATE(User::root, User::nobody);
  INFO("as " << name_of(user));
  // 40 sleeping children (harmless outside): how many could start.
  const std::string code =
      "import os, time\n"
      "started = 0\n"
      "for _ in range(40):\n"
      "    try:\n"
      "        if os.fork() == 0:\n"
      "            os.closerange(1, 3)  # not holding the output open: the call ends when the parent does\n"
      "            time.sleep(30)\n"
      "            os._exit(0)\n"
      "        started += 1\n"
      "    except OSError:\n"
      "        break\n"
      "print('started', started)\n";
  const json reply = as_user(user, [&](PythonToolOptions options) {
    options.max_processes = 8;
    options.timeout_s = 20;
    json results{{"sandboxed", sandboxed(code, options)}};
    results["control"] = unisolated(code, options);
    return results;
  });
  INFO("sandboxed:\n" << text_of(reply["sandboxed"]) << "control:\n" << text_of(reply["control"]));
  // bubblewrap, its init and the interpreter count among the 8.
  CHECK_THAT(text_of(reply["sandboxed"]), Catch::StartsWith("started "));
  const int started = std::stoi(text_of(reply["sandboxed"]).substr(8));
  CHECK((started >= 4 && started < 8));
  CHECK_THAT(text_of(reply["control"]), Catch::StartsWith("started 40\n"));
}

TEST_CASE("a call's memory is bounded as a whole, not only per process", "[sandbox][limits]") {
  const User user = GENERATE(User::root, User::nobody);
  INFO("as " << name_of(user));
  // Three children of 150 MiB each: each under the per-process 256 MiB, together over the call's.
  const std::string code =
      "import os, time\n"
      "children = []\n"
      "for _ in range(3):\n"
      "    pid = os.fork()\n"
      "    if pid == 0:\n"
      "        block = b'x' * (150 << 20)\n"
      "        time.sleep(1)  # all three resident at once\n"
      "        os._exit(0)\n"
      "    children.append(pid)\n"
      "completed = sum(os.waitpid(pid, 0)[1] == 0 for pid in children)\n"
      "print('completed', completed)\n"
      "raise SystemExit(0 if completed == 3 else 1)\n";
  const json reply = as_user(user, [&](PythonToolOptions options) {
    options.memory_mb = 256;
    json results{{"sandboxed", sandboxed(code, options)}};
    results["control"] = unisolated(code, options);
    return results;
  });
  const std::string inside = text_of(reply["sandboxed"]);
  INFO("sandboxed:\n" << inside << "control:\n" << text_of(reply["control"]));
  CHECK_THAT(inside, !Catch::Contains("completed 3"));
  // The model is told why: the kernel killed a process of the call at its memory limit.
  CHECK_THAT(inside, Catch::Contains("error: killed: over its memory limit (256 MiB)"));
  CHECK(reply["sandboxed"]["error"] == true);
  CHECK_THAT(text_of(reply["control"]), Catch::StartsWith("completed 3"));
}

TEST_CASE("file size, open files, CPU bandwidth and the scratch directory's size are bounded", "[sandbox][limits]") {
  const User user = GENERATE(User::root, User::nobody);
  INFO("as " << name_of(user));
  const std::string code =
      "import os, time\n"
      "open('small', 'wb').write(b'x' * (512 << 10))\n"
      "try:\n"
      "    open('large', 'wb').write(b'x' * (2 << 20))\n"
      "    print('large written')\n"
      "except OSError as e:\n"
      "    print('large refused', e.errno)\n"
      "files = []\n"
      "try:\n"
      "    for _ in range(200):\n"
      "        files.append(open('small'))\n"
      "except OSError as e:\n"
      "    print('open refused', e.errno)\n"
      "print('opened', len(files))\n"
      "children = []\n"
      "for _ in range(2):\n"
      "    pid = os.fork()\n"
      "    if pid == 0:\n"
      "        end = time.monotonic() + 1.0\n"
      "        while time.monotonic() < end: pass\n"
      "        os._exit(0)\n"
      "    children.append(pid)\n"
      "for pid in children: os.waitpid(pid, 0)\n"
      "print('cpu %.2f' % os.times().children_user)\n"
      "files = 0\n"
      "try:\n"
      "    while True:\n"
      "        open('fill%d' % files, 'wb').write(b'x' * (512 << 10))\n"
      "        files += 1\n"
      "except OSError as e:\n"
      "    print('scratch full', e.errno, files // 2)\n";
  const json reply = as_user(user, [&](PythonToolOptions options) {
    options.file_size_mb = 1;
    options.max_open_files = 64;
    options.cpu_cores = 0.25;
    return json{{"sandboxed", sandboxed(code, options)}};
  });
  const std::string inside = text_of(reply["sandboxed"]);
  INFO(inside);
  CHECK_THAT(inside, Catch::StartsWith("large refused 27\nopen refused 24\nopened "));  // EFBIG, EMFILE
  const int opened = std::stoi(inside.substr(inside.find("opened ") + 7));
  CHECK((opened > 32 && opened < 64));  // 64 descriptors, a few the interpreter's own
  // Two processes spinning for 1 s of wall clock on a quarter of a core: about 0.25 s of CPU, never 2.
  const double cpu = std::stod(inside.substr(inside.find("cpu ") + 4));
  CHECK(cpu < 0.6);
  // The scratch directory is a tmpfs of half the call's memory (512 MiB): never the host's disk.
  CHECK_THAT(inside, Catch::Contains("scratch full 28 25"));  // ENOSPC after 250-255 MiB
}

TEST_CASE("calls beside a fork bomb and a memory hog still complete", "[sandbox][limits]") {
  const User user = GENERATE(User::root, User::nobody);
  INFO("as " << name_of(user));
  const json reply = as_user(user, [&](PythonToolOptions options) {
    options.timeout_s = 3;
    options.cpu_seconds = 3;
    const PythonTool tool(options);
    auto call = [&tool](const std::string& code) {
      return as_json(tool.call({{"code", code}}, rlcore::ToolCallContext{}));
    };
    auto bomb =
        std::async(std::launch::async, call, "import os\nwhile True:\n    try: os.fork()\n    except OSError: pass\n");
    auto hog = std::async(std::launch::async, call,
                          "import os\nfor _ in range(6): os.fork()\nblocks = []\n"
                          "while True: blocks.append(b'x' * (16 << 20))\n");
    ::usleep(500000);
    std::vector<std::future<json>> quiet;
    for (int i = 0; i < 3; ++i) quiet.push_back(std::async(std::launch::async, call, "print(6 * 7)"));
    json results{{"quiet", json::array()}};
    for (auto& q : quiet) results["quiet"].push_back(q.get());
    results["bomb"] = bomb.get();
    results["hog"] = hog.get();
    return results;
  });
  INFO(reply.dump(1));
  for (const json& quiet : reply["quiet"]) {
    CHECK(quiet["text"] == "42\n");
    CHECK(quiet["error"] == false);
  }
  CHECK(reply["bomb"]["error"] == true);
  CHECK_THAT(reply["bomb"]["text"].get<std::string>(), Catch::Contains("reached its limit of 16 processes"));
  CHECK(reply["hog"]["error"] == true);
}
