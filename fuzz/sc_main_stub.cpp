// libsystemc references sc_main; a libFuzzer binary has libFuzzer's main(), so this is never run.
#include <systemc>

int sc_main(int, char*[]) {
  return 0;
}
