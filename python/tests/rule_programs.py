"""Generated launch programs for the rule checker's property test (test_launch_rules.py).

A program is a prompt process with two threads per case: thread A makes call X, thread B makes
call Y, and the case puts one kind of synchronisation between them, or a decoy that looks like
one and orders nothing. The generator knows which cases order X before Y, so it knows the
verdict every schedule must give. The peer process is a decoder that holds the cache the
transfers write into.
"""
import random
import textwrap

#: How each kind orders A's call before B's: lines before and after X in A, before Y in B,
#: the lock each call is made under, how the pair runs, and whether X is ordered before Y.
EDGES = {
    "none": dict(ordered=False),
    "event": dict(post_a=["ev.set()"], pre_b=["ev.wait()"], ordered=True),
    "event_too_early": dict(pre_a=["ev.set()"], pre_b=["ev.wait()"], ordered=False),
    "queue": dict(post_a=["q.put(1)"], pre_b=["q.get()"], ordered=True),
    "queue_too_early": dict(pre_a=["q.put(1)"], pre_b=["q.get()"], ordered=False),
    "lock_both": dict(lock_a=True, lock_b=True, ordered=True),
    "lock_one_side": dict(lock_a=True, pre_b=["with lock:", "    pass"], ordered=False),
    "condition": dict(post_a=["with cv:", "    st['flag'] = True", "    cv.notify()"],
                      pre_b=["with cv:", "    while not st.get('flag'):", "        cv.wait()"],
                      ordered=True),
    "semaphore": dict(post_a=["sem.release()"], pre_b=["sem.acquire()"], ordered=True),
    "socketpair": dict(post_a=["sa.send(b'x')"], pre_b=["sb.recv(1)"], ordered=True),
    "barrier": dict(post_a=["bar.wait()"], pre_b=["bar.wait()"], ordered=True),
    "join": dict(how="join", ordered=True),
    "future": dict(how="future", pre_b=["ctx['f'].result()"], ordered=True),
    "sleep": dict(pre_b=["time.sleep(0.2)"], ordered=False),
}

_HEAD = '''\
import socket
import sys
import threading
import time
import queue
from concurrent.futures import ThreadPoolExecutor

import torch
from llm_datadist import (BlocksCacheKey, CacheDesc, DataType, LayerSynchronizer,
                          LLMClusterInfo, LLMConfig, LLMDataDist, LLMRole, LLMStatusCode,
                          Placement, TransferWithCacheKeyConfig)

LAYERS, BLOCKS, ELEMS = 2, 4, 64
P, D = 0, 1
SIDE = 5570
ROLE, HOST, PEER = sys.argv[1], sys.argv[2], sys.argv[3]
MUTANT = sys.argv[4] if len(sys.argv) > 4 else ""
order = []


class Ready(LayerSynchronizer):
    def synchronize_layer(self, layer_index, timeout_in_millis):
        return True


def open_datadist(role, cluster):
    dd = LLMDataDist(role, cluster)
    config = LLMConfig()
    config.device_id = 0
    config.listen_ip_info = f"{HOST}:26000"
    config.enable_cache_manager = True
    config.enable_remote_cache_accessible = True
    dd.init(config.generate_options())
    desc = CacheDesc(2 * LAYERS, [BLOCKS, ELEMS], DataType.DT_FLOAT16, Placement.DEVICE)
    tensors = [torch.zeros(BLOCKS, ELEMS, dtype=torch.float16).npu() for _ in range(2 * LAYERS)]
    cache = dd.cache_manager.register_blocks_cache(desc, [t.data_ptr() for t in tensors],
                                                   BlocksCacheKey(cluster, 0))
    return dd, cache, tensors


def check(status):
    if status != LLMStatusCode.LLM_SUCCESS:
        raise RuntimeError(f"transfer: {status}")


def cfg():
    return TransferWithCacheKeyConfig(BlocksCacheKey(D, 0), range(0, LAYERS), range(0, LAYERS))


def run_pair(first, second, how, ctx):
    if how == "join":
        a = threading.Thread(target=first, name="A")
        a.start()
        a.join()
        second()
        return
    if how == "future":
        with ThreadPoolExecutor(1, thread_name_prefix="A") as pool:
            ctx["f"] = pool.submit(first)
            b = threading.Thread(target=second, name="B")
            b.start()
            b.join()
        return
    a = threading.Thread(target=first, name="A")
    b = threading.Thread(target=second, name="B")
    a.start()
    b.start()
    a.join()
    b.join()


def peer():
    dd, cache, tensors = open_datadist(LLMRole.DECODER, D)
    server = socket.create_server((HOST, SIDE))
    conn, _ = server.accept()
    conn.sendall(b"r")
    conn.recv(1)  # bye
    dd.finalize()


def objects():
    sa, sb = socket.socketpair()
    return dict(ev=threading.Event(), q=queue.Queue(), lock=threading.Lock(),
                cv=threading.Condition(), st={}, sem=threading.Semaphore(0), sa=sa, sb=sb,
                bar=threading.Barrier(2), ctx={})


def prompt():
    global dd, mgr, cache, side, tensors  # the cache's memory lives as long as its tensors
    if MUTANT == "event":  # a checker that misses Event's edge (the property must catch it)
        from kvsim.launched import happens_before
        threading.Event.wait = happens_before.original(threading.Event, "wait")
    dd, cache, tensors = open_datadist(LLMRole.PROMPT, P)
    mgr = dd.cache_manager
    while True:
        try:
            side = socket.create_connection((PEER, SIDE))
            break
        except ConnectionRefusedError:
            time.sleep(0.05)
    side.recv(1)
    link = LLMClusterInfo()
    link.remote_cluster_id = D
    link.append_local_ip_info(HOST, 26000)
    link.append_remote_ip_info(PEER, 26000)
    ret, _ = dd.link_clusters([link], 5000)
    if ret != LLMStatusCode.LLM_SUCCESS:
        raise RuntimeError(f"link: {ret}")
'''

_TAIL = '''
if __name__ == "__main__":
    torch.npu.set_device(0)
    if ROLE == "d":
        peer()
    else:
        prompt()
        cases()
        for line in order:
            print("ORDER", line)
'''

_X = ("t = mgr.transfer_cache_async(cache, Ready(), [cfg()], src_block_indices=[0], "
      "dst_block_indices=[1])")


def _block(lines, indent):
    return [" " * indent + line for line in lines]


def _thread_body(out, pre, body, locked):
    """Appends a thread function's lines (the call under `lock` if locked); returns the offset
    of its first call."""
    out += _block(pre, 8)
    if locked:
        out += _block(["with lock:"], 8)
    at = len(out)
    out += _block(body, 12 if locked else 8)
    return at


def _case(number, kind, y_call):
    """The lines of one case function; returns (lines, offset of X, offset of Y)."""
    e = EDGES[kind]
    out = [f"def case_{number}():  # {kind}",
           "    o = objects()",
           "    ev, q, lock, cv, st, sem, sa, sb, bar, ctx = (o[k] for k in ('ev', 'q', 'lock', "
           "'cv', 'st', 'sem', 'sa', 'sb', 'bar', 'ctx'))",
           "",
           "    def first():"]
    x_at = _thread_body(out, e.get("pre_a", []), [_X, "check(t.synchronize())",
                                                   f"order.append('{number} A')"],
                        e.get("lock_a"))
    out += _block(e.get("post_a", []), 8)
    out += ["", "    def second():"]
    y_at = _thread_body(out, e.get("pre_b", []), y_call + [f"order.append('{number} B')"],
                        e.get("lock_b"))
    out += ["", f"    run_pair(first, second, {e.get('how', 'threads')!r}, ctx)", "", ""]
    return out, x_at, y_at


def generate(seed):
    """(program text, expected findings {(rule, frozenset of two line numbers)}, case kinds)."""
    rng = random.Random(seed)
    kinds = list(EDGES)
    rng.shuffle(kinds)
    final = rng.choice(list(EDGES))
    lines = _HEAD.splitlines() + ["", ""]
    expected = set()
    runs = []
    for n, kind in enumerate(kinds):
        case, x, y = _case(n, kind, [_X, "check(t.synchronize())"])
        base = len(lines) + 1  # line numbers from 1
        lines += case
        runs.append(f"    case_{n}()")
        if not EDGES[kind]["ordered"]:
            expected.add(("ConcurrentTransfer", frozenset({base + x, base + y})))
    n = len(kinds)
    case, x, y = _case(n, final, ["dd.finalize()"])
    base = len(lines) + 1
    lines += case
    if not EDGES[final]["ordered"]:
        expected.add(("FinalizeWhileBusy", frozenset({base + x, base + y})))
    lines += ["def cases():"] + runs + [f"    case_{n}()", "    side.sendall(b'b')", ""]
    text = "\n".join(lines) + textwrap.dedent(_TAIL)
    return text, expected, kinds + [final]
