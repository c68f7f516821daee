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
//
// The real functions (ASan's, libsystemc's abort) are not always in the global scope that
// dlsym(RTLD_NEXT) searches: a Python extension module is loaded with RTLD_LOCAL, and with it its
// dependencies libsystemc and, unless the interpreter preloads it, the ASan runtime. Then
// RTLD_NEXT finds nothing, while libsystemc still calls this file (preloaded, so global) for
// what it defines: abort jumped to a null pointer (the Python tier's SEGV when a job ended), and
// the switch was never started while libsystemc finished it with ASan's own function ("finishing
// a fiber switch that has not started", kvsim launch). So a symbol RTLD_NEXT misses is looked up
// in every loaded object but this one.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>

typedef void (*start_switch_fn)(void**, const void*, size_t);
typedef void (*finish_switch_fn)(void*, const void**, size_t*);
typedef void (*abort_fn)(void*, void*);

struct sc_cor_qt_layout {
  void* vptr;
  size_t m_stack_size;
  void* m_stack;
};

struct loaded_names {
  const char** names;
  size_t count, capacity;
};

static int collect_name(struct dl_phdr_info* info, size_t size, void* data) {
  struct loaded_names* list = (struct loaded_names*)data;
  (void)size;
  if (info->dlpi_name == NULL || info->dlpi_name[0] == '\0') return 0;  // the executable, vdso
  if (list->count == list->capacity) {
    size_t capacity = list->capacity ? 2 * list->capacity : 64;
    const char** grown = (const char**)realloc(list->names, capacity * sizeof *grown);
    if (grown == NULL) return 1;
    list->names = grown;
    list->capacity = capacity;
  }
  list->names[list->count++] = info->dlpi_name;
  return 0;
}

// The definition of `name` after this file's: RTLD_NEXT, else any loaded object but this one
// (names collected first, so that no dlopen runs under dl_iterate_phdr's lock).
static void* next_symbol(const char* name) {
  void* sym = dlsym(RTLD_NEXT, name);
  if (sym != NULL) return sym;
  Dl_info self;
  if (dladdr((void*)&next_symbol, &self) == 0) return NULL;
  struct loaded_names list = {NULL, 0, 0};
  dl_iterate_phdr(collect_name, &list);
  for (size_t i = 0; i < list.count && sym == NULL; ++i) {
    void* handle = dlopen(list.names[i], RTLD_LAZY | RTLD_NOLOAD);
    if (handle == NULL) continue;
    void* found = dlsym(handle, name);
    Dl_info where;
    if (found != NULL && dladdr(found, &where) != 0 && where.dli_fbase != self.dli_fbase) {
      sym = found;
    }
    dlclose(handle);  // drops the reference RTLD_NOLOAD took; the object stays loaded
  }
  free(list.names);
  return sym;
}

// Looked up once; a program without ASan (or SystemC) finds nothing, and that is kept too.
#define NOT_FOUND ((void*)-1)
static void* cached_symbol(void** slot, const char* name) {
  void* sym = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
  if (sym == NULL) {
    sym = next_symbol(name);
    if (sym == NULL) sym = NOT_FOUND;
    __atomic_store_n(slot, sym, __ATOMIC_RELEASE);
  }
  return sym == NOT_FOUND ? NULL : sym;
}

static start_switch_fn real_start(void) {
  static void* fn;
  return (start_switch_fn)cached_symbol(&fn, "__sanitizer_start_switch_fiber");
}

static finish_switch_fn real_finish(void) {
  static void* fn;
  return (finish_switch_fn)cached_symbol(&fn, "__sanitizer_finish_switch_fiber");
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
  static void* fn;
  abort_fn real_abort =
      (abort_fn)cached_symbol(&fn, "_ZN7sc_core13sc_cor_pkg_qt5abortEPNS_6sc_corE");
  const struct sc_cor_qt_layout* next = (const struct sc_cor_qt_layout*)next_cor;
  (void)real_finish();  // looked up here: the helper runs mid-switch, on the next stack
  __sanitizer_start_switch_fiber(NULL, next->m_stack, next->m_stack_size);
  real_abort(self, next_cor);
}

// The helper QuickThreads runs on the new stack after an abort: end the switch there.
void* sc_cor_qt_aborthelp(void* sp, void* old_cor, void* unused) {
  (void)sp;
  (void)old_cor;
  (void)unused;
  if (real_finish()) real_finish()(NULL, NULL, NULL);
  return NULL;
}
