// Anchors the vtables of Grader and Tool in librlcore_sdk.
#include "rlcore/grader.h"
#include "rlcore/tool.h"

namespace rlcore {
Grader::~Grader() = default;
BatchGrader::~BatchGrader() = default;
Tool::~Tool() = default;
}  // namespace rlcore
