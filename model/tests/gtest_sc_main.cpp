// GoogleTest entry point for programs linked with SystemC: libsystemc's main() calls sc_main().
#include <gtest/gtest.h>

#include <systemc>  // declares sc_main extern "C"

int sc_main(int argc, char* argv[]) {
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
