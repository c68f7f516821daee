// Preloaded in sanitizer runs (tools/run-sanitizers.sh) so that AddressSanitizer follows
// SystemC's coroutines exactly. Debian's libsystemc 2.3.4 (sc_cor_qt.cpp) tells ASan about its
// stack switches, with two gaps:
// - a switch to the main coroutine names a null stack of size 0 (the main coroutine has no stack
//   of its own): ASan then believes the thread's stack is empty;
// - sc_cor_pkg_qt::abort, the switch away from a process that has ended, tells ASan nothing.
// Either way ASan stops clearing the frames that exceptions unwind ("ignoring requested
// __asan_handle_no_return") and reports false stack errors later. This names the thread's own
// stack for the main coroutine, and annotates abort as yield is annotated. The layout of
// sc_cor_qt (vptr, m_stack_size, m_stack, m_sp, m_pkg) is that of SystemC 2.3.4's sc_cor_qt.h.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>

typedef void (*start_switch_fn)(void**, const void*, size_t);
typedef void (*finish_switch_fn)(void*, const void**, size_t*);
typedef void (*abort_fn)(void*, void*);

struct sc_cor_qt_layout {
  void* vptr;
  size_t m_stack_size;
  void* m_stack;
};

static start_switch_fn real_start(void) {
  static start_switch_fn fn;
  if (!fn) fn = (start_switch_fn)dlsym(RTLD_NEXT, "__sanitizer_start_switch_fiber");
  return fn;
}

void __sanitizer_start_switch_fiber(void** fake_stack, const void* bottom, size_t size) {
  static __thread void* thread_bottom;
  static __thread size_t thread_size;
  if (!real_start()) return;  // a program without ASan
  if (bottom == NULL && size == 0) {
    if (thread_bottom == NULL) {
      pthread_attr_t attr;
      if (pthread_getattr_np(pthread_self(), &attr) == 0) {
        pthread_attr_getstack(&attr, &thread_bottom, &thread_size);
        pthread_attr_destroy(&attr);
      }
    }
    bottom = thread_bottom;
    size = thread_size;
  }
  real_start()(fake_stack, bottom, size);
}

// sc_core::sc_cor_pkg_qt::abort(sc_cor*): announce the switch, then make it.
void _ZN7sc_core13sc_cor_pkg_qt5abortEPNS_6sc_corE(void* self, void* next_cor) {
  static abort_fn real_abort;
  if (!real_abort) {
    real_abort = (abort_fn)dlsym(RTLD_NEXT, "_ZN7sc_core13sc_cor_pkg_qt5abortEPNS_6sc_corE");
  }
  const struct sc_cor_qt_layout* next = (const struct sc_cor_qt_layout*)next_cor;
  __sanitizer_start_switch_fiber(NULL, next->m_stack, next->m_stack_size);
  real_abort(self, next_cor);
}

// The helper QuickThreads runs on the new stack after an abort: end the switch there.
void* sc_cor_qt_aborthelp(void* sp, void* old_cor, void* unused) {
  static finish_switch_fn finish;
  (void)sp;
  (void)old_cor;
  (void)unused;
  if (!finish) finish = (finish_switch_fn)dlsym(RTLD_NEXT, "__sanitizer_finish_switch_fiber");
  if (finish) finish(NULL, NULL, NULL);
  return NULL;
}
