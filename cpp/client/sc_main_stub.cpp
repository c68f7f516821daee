// libsystemc.so references sc_main (its own main() calls it). A program that links kvsim's C++
// libraries has its own main, so the client library provides an unused sc_main, exported so
// that the dynamic loader resolves libsystemc against it.
extern "C" __attribute__((visibility("default"))) int sc_main(int, char**) {
  return 0;
}
