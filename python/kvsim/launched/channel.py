"""The calling thread's channel to the world (libkvsim_channel's C interface, through ctypes).

libkvsim_channel is loaded already (the preloaded shim depends on it); each thread has its own
connection, so threads call concurrently. A call releases the GIL while it waits.
"""
import ctypes

_lib = None


def _library():
    global _lib
    if _lib is None:
        lib = ctypes.CDLL(None)  # the preloaded shim's dependencies are global
        if not hasattr(lib, "kvsim_channel_python_call"):
            lib = ctypes.CDLL("libkvsim_channel.so")
        lib.kvsim_channel_launched.restype = ctypes.c_int
        lib.kvsim_channel_python_call.restype = ctypes.c_int
        lib.kvsim_channel_python_call.argtypes = [
            ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p),
            ctypes.POINTER(ctypes.c_size_t)]
        lib.kvsim_channel_release.argtypes = [ctypes.c_void_p]
        lib.kvsim_channel_now_ps.restype = ctypes.c_uint64
        _lib = lib
    return _lib


def launched():
    """True if the world accepted this process."""
    try:
        return bool(_library().kvsim_channel_launched())
    except OSError:
        return False


def call(request):
    """The world's reply to one kPython request (bytes). ConnectionError if the world cannot
    answer (it is gone, or refused this thread)."""
    lib = _library()
    out = ctypes.c_void_p()
    size = ctypes.c_size_t()
    if lib.kvsim_channel_python_call(request, len(request), ctypes.byref(out),
                                     ctypes.byref(size)) != 0:
        raise ConnectionError("kvsim: the world does not answer this process's calls")
    try:
        return ctypes.string_at(out, size.value)
    finally:
        lib.kvsim_channel_release(out)


def now_ps():
    """The simulated time of the calling thread, in picoseconds."""
    return int(_library().kvsim_channel_now_ps())
