// The config reference: every declared key (core and loaded components) with
// type, default, constraint and doc, as text or as docs/config-reference.md.
#pragma once

#include <string>

#include "rlcore/export.h"
#include "rlcore/registry.h"

namespace rlcore::config {

RLCORE_API std::string config_reference_text(const Registry& registry);
RLCORE_API std::string config_reference_markdown(const Registry& registry);

}  // namespace rlcore::config
