// Symbol visibility: everything is hidden by default (-fvisibility=hidden);
// RLCORE_API marks what librlcore_sdk and librlcore_core export.
#pragma once

#define RLCORE_API __attribute__((visibility("default")))
