// Anchors Grader's vtable in librlcore_sdk.
#include "rlcore/grader.h"

namespace rlcore {
Grader::~Grader() = default;
BatchGrader::~BatchGrader() = default;
}  // namespace rlcore
