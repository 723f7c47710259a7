#include <gtest/gtest.h>
TEST(GateUnit, Placeholder) {}
