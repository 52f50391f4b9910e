// One broken-engine plugin (tests/CMakeLists.txt builds six): BROKEN_PLUGIN_NAME and
// BROKEN_REGISTER (one of broken_engines.h's register functions) say which.
#include "broken_engines.h"
#include "rlcore/plugin.h"

RLCORE_PLUGIN(BROKEN_PLUGIN_NAME, "0.0.1", BROKEN_REGISTER)
