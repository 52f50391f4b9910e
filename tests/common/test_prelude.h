// What every test source starts with, before its own includes: the tests'
// precompiled header (or a forced include where there is none). ATen comes first
// because Debian's libtorch brings glog, whose CHECK macro Catch's then replaces:
// CHECK is Catch's in every test, whatever a file includes and however a unity
// build batches the files.
#pragma once

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>
#undef CHECK
#include <catch2/catch.hpp>
