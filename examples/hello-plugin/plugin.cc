// Registers the `keywords` grader: `rlcore grade --grader keywords keywords=[a,b]`.
#include "rlcore/plugin.h"

#include "keyword_grader.h"

namespace hello {
namespace {

void register_hello(rlcore::PluginRegistrar& registrar) {
  registrar.add<rlcore::Grader>("keywords", "Fraction of keywords the response mentions (example plugin)",
                                rlcore::OptionsSchema<KeywordOptions>()
                                    .key("keywords", &KeywordOptions::keywords,
                                         "Keywords to look for; empty: the ground truth's comma-separated words.")
                                    .key("case_sensitive", &KeywordOptions::case_sensitive, "Match case exactly."),
                                [](const KeywordOptions& options) { return std::make_unique<KeywordGrader>(options); });
}

}  // namespace
}  // namespace hello

RLCORE_PLUGIN("hello-keywords", "1.0.0", hello::register_hello)
