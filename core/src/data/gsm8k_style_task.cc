// The gsm8k-style task (see gsm8k_style_task.h): word-problem templates filled
// with the data code's platform-independent random draws, so a seed gives the
// same files everywhere.
#include <filesystem>
#include <set>

#include "data/parquet/records.h"
#include "data/random.h"
#include "rlcore/core/data/gsm8k_style_task.h"
#include "rlcore/error.h"

namespace rlcore::data {
namespace {

constexpr int64_t kGsm8kTrainStream = 0;  // random streams of the seed, one per split
constexpr int64_t kGsm8kTestStream = 1;

struct Person {
  const char* name;
  const char* pronoun;  // "She" / "He"
};
constexpr Person kPeople[] = {{"Natalia", "She"}, {"Weng", "She"},   {"Betty", "She"},   {"Julie", "She"},
                              {"James", "He"},    {"Albert", "He"},  {"Ken", "He"},      {"Alexis", "She"},
                              {"Tina", "She"},    {"Randy", "He"},   {"Mark", "He"},     {"Joy", "She"},
                              {"Carla", "She"},   {"Brandon", "He"}, {"Sofia", "She"},   {"Omar", "He"},
                              {"Priya", "She"},   {"Kenji", "He"},   {"Marisol", "She"}, {"Tobias", "He"}};
constexpr const char* kThings[] = {"stickers", "marbles", "pencils", "trading cards", "stamps", "beads", "seashells"};

// Draws for one problem, and the worked answer as GSM8K writes it: each step
// "<<expression=value>>value", the final line "#### value".
class Draw {
 public:
  explicit Draw(std::mt19937_64& engine) : engine_(engine) {}

  int64_t between(int64_t low, int64_t high) {
    return low + static_cast<int64_t>(data::random::uniform_below(engine_, static_cast<uint64_t>(high - low + 1)));
  }
  const Person& person() { return kPeople[data::random::uniform_below(engine_, std::size(kPeople))]; }
  std::string thing() { return kThings[data::random::uniform_below(engine_, std::size(kThings))]; }

 private:
  std::mt19937_64& engine_;
};

std::string n(int64_t value) { return std::to_string(value); }

// "a+b = <<a+b=c>>c"
std::string step(const std::string& expression, int64_t value) {
  return expression + " = <<" + expression + "=" + n(value) + ">>" + n(value);
}

Gsm8kStyleProblem finish(std::string question, std::vector<std::string> lines, int64_t solution) {
  std::string answer;
  for (const auto& line : lines) answer += line + "\n";
  answer += "#### " + n(solution);
  return {std::move(question), std::move(answer), solution};
}

Gsm8kStyleProblem more_in_may(Draw& draw) {
  const Person& p = draw.person();
  const std::string things = draw.thing();
  const int64_t april = draw.between(12, 96), more = draw.between(2, 30), may = april + more;
  return finish(std::string(p.name) + " sold " + n(april) + " " + things + " to friends in April, and then " + n(more) +
                    " more " + things + " in May than in April. How many " + things + " did " + p.name +
                    " sell altogether in April and May?",
                {"In May, " + std::string(p.name) + " sold " + step(n(april) + "+" + n(more), may) + " " + things + ".",
                 "Altogether " + std::string(p.name) + " sold " + step(n(april) + "+" + n(may), april + may) + " " +
                     things + " in April and May."},
                april + may);
}

Gsm8kStyleProblem buys_packs(Draw& draw) {
  const Person& p = draw.person();
  const std::string things = draw.thing();
  const int64_t has = draw.between(5, 80), packs = draw.between(2, 9), each = draw.between(3, 15);
  const int64_t bought = packs * each;
  return finish(std::string(p.name) + " has " + n(has) + " " + things + ". " + p.pronoun + " buys " + n(packs) +
                    " packs with " + n(each) + " " + things + " in each pack. How many " + things + " does " + p.name +
                    " have now?",
                {"The packs hold " + step(n(packs) + "*" + n(each), bought) + " " + things + ".",
                 std::string(p.name) + " now has " + step(n(has) + "+" + n(bought), has + bought) + " " + things + "."},
                has + bought);
}

Gsm8kStyleProblem hourly_wage(Draw& draw) {
  const Person& p = draw.person();
  const int64_t wage = draw.between(8, 30), hours = draw.between(2, 9), days = draw.between(2, 7);
  const int64_t daily = wage * hours;
  return finish(std::string(p.name) + " earns $" + n(wage) + " an hour babysitting. " + p.pronoun + " works " +
                    n(hours) + " hours a day for " + n(days) + " days. How many dollars does " + p.name + " earn?",
                {"Each day " + std::string(p.name) + " earns " + step(n(wage) + "*" + n(hours), daily) + " dollars.",
                 "In " + n(days) + " days that is " + step(n(daily) + "*" + n(days), daily * days) + " dollars."},
                daily * days);
}

Gsm8kStyleProblem reading_pages(Draw& draw) {
  const Person& p = draw.person();
  const int64_t monday = draw.between(6, 40), tuesday = 2 * monday, fewer = draw.between(1, tuesday - 1);
  const int64_t wednesday = tuesday - fewer;
  return finish(
      std::string(p.name) + " reads " + n(monday) + " pages on Monday and twice as many pages on Tuesday. " +
          "On Wednesday " + std::string(p.pronoun[0] == 'S' ? "she" : "he") + " reads " + n(fewer) +
          " fewer pages than on Tuesday. How many pages does " + p.name + " read in the three days?",
      {"On Tuesday " + std::string(p.name) + " reads " + step("2*" + n(monday), tuesday) + " pages.",
       "On Wednesday " + std::string(p.name) + " reads " + step(n(tuesday) + "-" + n(fewer), wednesday) + " pages.",
       "In all " + std::string(p.name) + " reads " +
           step(n(monday) + "+" + n(tuesday) + "+" + n(wednesday), monday + tuesday + wednesday) + " pages."},
      monday + tuesday + wednesday);
}

Gsm8kStyleProblem cookie_boxes(Draw& draw) {
  const Person& p = draw.person();
  const int64_t boxes = draw.between(3, 12), per_box = draw.between(4, 20), given = draw.between(1, boxes - 1);
  const int64_t cookies = boxes * per_box, kept = boxes - given;
  return finish(std::string(p.name) + " baked " + n(cookies) + " cookies and put them equally into " + n(boxes) +
                    " boxes. " + p.pronoun + " gave " + n(given) + " of the boxes to neighbors. How many cookies are " +
                    "in the boxes " + p.name + " kept?",
                {"Each box holds " + step(n(cookies) + "/" + n(boxes), per_box) + " cookies.",
                 std::string(p.name) + " kept " + step(n(boxes) + "-" + n(given), kept) + " boxes.",
                 "They hold " + step(n(per_box) + "*" + n(kept), per_box * kept) + " cookies."},
                per_box * kept);
}

Gsm8kStyleProblem weekly_savings(Draw& draw) {
  const Person& p = draw.person();
  const int64_t weekly = draw.between(5, 40), weeks = draw.between(3, 12);
  const int64_t saved = weekly * weeks, spent = draw.between(1, saved - 1);
  return finish(std::string(p.name) + " saves $" + n(weekly) + " every week. After " + n(weeks) + " weeks " +
                    std::string(p.pronoun[0] == 'S' ? "she" : "he") + " spends $" + n(spent) +
                    " on a new bike helmet. How many dollars does " + p.name + " have left?",
                {std::string(p.name) + " saved " + step(n(weekly) + "*" + n(weeks), saved) + " dollars.",
                 std::string(p.name) + " has " + step(n(saved) + "-" + n(spent), saved - spent) + " dollars left."},
                saved - spent);
}

Gsm8kStyleProblem tomato_garden(Draw& draw) {
  const int64_t rows = draw.between(2, 15), plants = draw.between(3, 12), tomatoes = draw.between(4, 25);
  const int64_t all_plants = rows * plants;
  return finish("A garden has " + n(rows) + " rows with " + n(plants) +
                    " tomato plants in each row. Each plant grows " + n(tomatoes) +
                    " tomatoes. How many tomatoes does the garden grow?",
                {"The garden has " + step(n(rows) + "*" + n(plants), all_plants) + " plants.",
                 "They grow " + step(n(all_plants) + "*" + n(tomatoes), all_plants * tomatoes) + " tomatoes."},
                all_plants * tomatoes);
}

Gsm8kStyleProblem bus_stops(Draw& draw) {
  const int64_t start = draw.between(15, 60), off = draw.between(1, start - 1), on = draw.between(1, 30);
  const int64_t after = start - off;
  return finish("A bus leaves the station with " + n(start) + " passengers. At the first stop " + n(off) +
                    " passengers get off and " + n(on) + " get on. How many passengers are on the bus now?",
                {"After " + n(off) + " get off there are " + step(n(start) + "-" + n(off), after) + " passengers.",
                 "After " + n(on) + " get on there are " + step(n(after) + "+" + n(on), after + on) + " passengers."},
                after + on);
}

Gsm8kStyleProblem (*const kTemplates[])(Draw&) = {more_in_may,  buys_packs,     hourly_wage,   reading_pages,
                                                  cookie_boxes, weekly_savings, tomato_garden, bus_stops};

Gsm8kStyleProblem draw_problem(std::mt19937_64& engine) {
  Draw draw(engine);
  return kTemplates[data::random::uniform_below(engine, std::size(kTemplates))](draw);
}

nlohmann::json record(const Gsm8kStyleProblem& problem, const char* split, int64_t index) {
  return {
      {"data_source", kGsm8kDataSource},
      {"prompt", nlohmann::json::array({{{"role", "user"}, {"content", problem.question + " " + kGsm8kInstruction}}})},
      {"ability", "math"},
      {"reward_model", {{"style", "rule"}, {"ground_truth", std::to_string(problem.solution)}}},
      {"extra_info", {{"split", split}, {"index", index}, {"answer", problem.answer}, {"question", problem.question}}}};
}

// Draws `count` problems no earlier split has (`seen` grows), giving up when the
// templates run out of new ones.
std::vector<nlohmann::json> draw_split(int64_t seed, int64_t stream, int64_t count, const char* split,
                                       std::set<std::string>& seen) {
  std::mt19937_64 engine = data::random::make_engine(seed, stream);
  std::vector<nlohmann::json> records;
  int64_t misses = 0;
  while (static_cast<int64_t>(records.size()) < count) {
    const Gsm8kStyleProblem problem = draw_problem(engine);
    if (!seen.insert(problem.question).second) {
      if (++misses > 1000 + 10 * count) {
        throw ValueError("gsm8k-style task: cannot draw " + std::to_string(count) + " distinct " + split +
                         " problems; ask for fewer");
      }
      continue;
    }
    records.push_back(record(problem, split, static_cast<int64_t>(records.size())));
  }
  return records;
}

}  // namespace

const std::vector<std::string>& gsm8k_columns() {
  static const std::vector<std::string> columns = {"data_source", "prompt", "ability", "reward_model", "extra_info"};
  return columns;
}

Gsm8kStyleTaskData make_gsm8k_style_task(const Gsm8kStyleTaskOptions& options) {
  if (options.train < 0 || options.test < 0) throw ValueError("gsm8k-style task: record counts must be >= 0");
  std::set<std::string> seen;
  Gsm8kStyleTaskData data;
  data.test = draw_split(options.seed, kGsm8kTestStream, options.test, "test", seen);
  data.train = draw_split(options.seed, kGsm8kTrainStream, options.train, "train", seen);
  return data;
}

Gsm8kStyleTaskFiles write_gsm8k_style_task(const Gsm8kStyleTaskData& data, const std::string& out_dir) {
  std::error_code error;
  std::filesystem::create_directories(out_dir, error);
  if (error) throw IoError("cannot create directory '" + out_dir + "': " + error.message());
  const std::filesystem::path dir(out_dir);
  Gsm8kStyleTaskFiles files{(dir / "train.parquet").string(), (dir / "test.parquet").string()};
  data::parquet::write_records(files.train, data.train, {gsm8k_columns()});
  data::parquet::write_records(files.test, data.test, {gsm8k_columns()});
  return files;
}

}  // namespace rlcore::data
