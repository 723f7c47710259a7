#include <gtest/gtest.h>
TEST(GateCli, Placeholder) {}
