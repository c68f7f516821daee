// libsystemc.so references sc_main (its own main() calls it); a Python module has no main, so it
// provides an unused one, exported so that the dynamic loader resolves libsystemc against it.
extern "C" __attribute__((visibility("default"))) int sc_main(int, char**) {
  return 0;
}
