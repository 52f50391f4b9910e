// The source that tests/common/test_prelude.h is precompiled with (rlcore_test_prelude).
