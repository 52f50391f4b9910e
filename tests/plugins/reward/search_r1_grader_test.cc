// The search_r1_like_qa_em grader against verl 0.9.1's search_r1_like_qa_em.py:
// every case scored, and every response normalised, by verl's own functions
// (reference/verl_math_graders.py) and by the C++ grader, non-English text included.
#include <catch2/catch.hpp>

#include <string>

#include <nlohmann/json.hpp>

#include "search_r1_grader.h"
#include "verl_math_reference.h"

namespace {

using rlcore::reward::extract_tagged_answer;
using rlcore::reward::normalize_qa_answer;
using rlcore::reward::qa_targets;
using rlcore::reward::SearchR1Grader;

nlohmann::json corpus() {
  nlohmann::json cases = nlohmann::json::array();
  const auto add = [&](std::string response, nlohmann::json targets) {
    cases.push_back({{"response", std::move(response)}, {"ground_truth", {{"target", std::move(targets)}}}});
  };
  const nlohmann::json paris = {"Paris", "Paris, France"};
  add("<answer>Paris</answer>", paris);
  add("I think <answer> paris </answer>", paris);
  add("<answer>The  Paris.</answer>", paris);
  add("<answer>Paris,France</answer>", paris);
  add("<answer>London</answer><answer>Paris</answer>", paris);  // the last answer counts
  add("<answer>Paris</answer><answer>London</answer>", paris);
  add("<answer>Paris", paris);  // unclosed: no answer
  add("no tags at all, Paris", paris);
  add("<answer></answer>", {""});
  add("<answer><answer>Paris</answer></answer>", paris);  // the lazy match starts at the first tag
  add(std::string(11, ' ') + "<answer>x</answer>" + std::string(12 * 10, ' '), {"x"});
  std::string padded;
  for (int i = 0; i < 11; ++i) padded += "<answer>Paris</answer>";
  add(padded, paris);  // > 10 tags: a quarter of the score
  add("<answer>an apple a day</answer>", {"apple day"});
  add("<answer>a</answer>", {""});
  add("<answer>The Beatles</answer>", "the beatles");  // a string target
  add("<answer>theatre and anatomy</answer>", {"theatre and anatomy"});
  add("<answer>the_a the-a a.b</answer>", {"the_a ab"});
  add("<answer>«a» an—the</answer>", {"« » —"});  // non-ASCII punctuation stays
  add("<answer>Éiffel TOWER</answer>", {"éiffel tower"});
  add("<answer>İSTANBUL</answer>", {"i̇stanbul"});
  add("<answer>ΟΔΟΣ ΣΑΣ Σ</answer>", {"οδος σας σ"});
  add("<answer>Straße\u00a0\u2003Ａ ｔｈｅ</answer>", {"straße ａ ｔｈｅ"});
  add("<answer>naïve a\u0301 b</answer>", {"naïve á b"});
  add("<answer>Tab\tnew\nline</answer>", {"tab new line"});
  add("<answer>1984</answer>", {"1984"});
  return cases;
}

}  // namespace

TEST_CASE("search_r1_like_qa_em agrees with verl 0.9.1 on every case, and normalises as verl does") {
  const nlohmann::json cases = corpus();
  const nlohmann::json verl = reward_test::verl_results("search_r1", cases);
  REQUIRE(verl.size() == cases.size());
  const SearchR1Grader grader;
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string response = cases[i].at("response");
    INFO("case " << i << ": " << response.substr(0, 120));
    CHECK(grader.grade(response, cases[i].at("ground_truth").dump(), "searchR1_nq", {}).score ==
          verl[i].at("score").get<double>());
    CHECK(normalize_qa_answer(response) == verl[i].at("normalized").get<std::string>());
  }
}

TEST_CASE("search_r1_like_qa_em reports acc and format_ok, and takes plain or listed targets") {
  const SearchR1Grader grader;
  const auto right = grader.grade("<answer>Paris</answer>", R"({"target": ["Rome", "paris"]})", "", {});
  CHECK(right.score == 1.0);
  CHECK(right.extras.at("acc") == 1.0);
  CHECK(right.extras.at("format_ok") == 1.0);
  const auto wrong = grader.grade("<answer>Lyon</answer>", "Paris", "", {});
  CHECK(wrong.score == 0.0);
  CHECK(wrong.extras.at("acc") == 0.0);
  CHECK(wrong.extras.at("format_ok") == 1.0);
  CHECK(grader.grade("Paris", "Paris", "", {}).extras.at("format_ok") == 0.0);
  CHECK(rlcore::reward::SearchR1Grader({0.1, 2.0}).grade("<answer>x</answer>", "y", "", {}).score == 0.1);
  CHECK(qa_targets(R"(["a", "b"])") == std::vector<std::string>{"a", "b"});
  CHECK(qa_targets(R"({"target": "a"})") == std::vector<std::string>{"a"});
  CHECK(qa_targets("not json") == std::vector<std::string>{"not json"});
  CHECK(qa_targets(R"({"target": [1984]})") == std::vector<std::string>{"1984"});  // verl would raise on the int
  CHECK(extract_tagged_answer(std::string(1 << 20, '<') + "<answer> x </answer>") == std::string("x"));
  // Bytes that are not UTF-8 read as U+FFFD, as decoded text would hold them.
  CHECK(grader.grade("<answer>\xff Broken</answer>", "\xef\xbf\xbd broken", "", {}).score == 1.0);
}
