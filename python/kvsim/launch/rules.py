"""The API's concurrency rules over the programs' happens-before order, not over the schedule.

Every llm_datadist call of a launched Python program carries its thread's vector clock, the
locks the thread holds, the thread's name and the program's line (kvsim.launched.remote). The
clocks come from the shim and from the program's own synchronisation
(kvsim.launched.happens_before): thread start and join, events, conditions, semaphores,
barriers, queues, futures, and bytes over sockets between threads and processes. Two calls are
ordered if the end of one happens before the start of the other, or if one thread held a lock
across one call and another thread held the same lock across the other (whichever took it
first). A pair of calls that a rule forbids to overlap and that the programs do not order is a
finding, whether or not it overlapped in this run: this is ThreadSanitizer's idea applied to the
API's rules, and the verdict does not change with the schedule the simulation took.

A transfer_cache_async call lasts from the call until a thread sees its task finished (a
synchronize() or get_results() that did not time out); a task that no thread saw finish lasts
to the end. Every other call lasts while its thread waits for it.
"""
import json
import struct
from dataclasses import dataclass, field
from typing import FrozenSet, Optional, Tuple

#: Each rule: what it forbids and where it comes from.
RULES = {
    "ConcurrentTransfer": (
        "transfer_cache_async must not be called while another transfer_cache_async task of "
        "the same LLMDataDist runs (spec §3.5: GE transfer_cache_async.md, 'the interface "
        "itself must not be called concurrently'; hixl data_cache_engine.cc "
        "DataCacheEngine::TransferCache shares one transfer stream)"),
    "LinkCallOverlap": (
        "with the v1 KvCacheManager, transfer_cache_async must not run concurrently with "
        "pull_cache or pull_blocks on the same link, from either end (spec §3.5: GE "
        "transfer_cache_async.md; the LLM_LINK_BUSY doc cites this pair)"),
    "FinalizeWhileBusy": (
        "finalize must not run concurrently with any other call of its LLMDataDist, tasks in "
        "flight included (spec §4, LLMDataDist.finalize)"),
}

_PULLS = frozenset({"pull_cache", "pull_blocks"})


def decode_clock(data):
    """{thread: count} of a clock's bytes (cpp/wire/vector_clock.h)."""
    if not data:
        return {}
    (n,) = struct.unpack_from("<I", data, 0)
    if len(data) != 4 + 8 * n:
        raise ValueError(f"a vector clock of {n} threads in {len(data)} bytes")
    pairs = struct.unpack_from(f"<{2 * n}I", data, 4)
    return dict(zip(pairs[0::2], pairs[1::2]))


@dataclass(frozen=True)
class Point:
    """One event of a thread: its id, its clock, the locks it holds and where it is."""
    thread: int
    clock: dict
    locks: FrozenSet[Tuple[str, int, int]]  # (process, lock key, serial of the hold)
    process: str
    thread_name: str
    where: str

    @property
    def epoch(self):
        return self.clock.get(self.thread, 0)

    def before(self, other):
        """True if this event happens before `other`."""
        return other.clock.get(self.thread, 0) >= self.epoch


@dataclass
class Call:
    """One API call: from `start` to `end` (None: not seen to end)."""
    api: str
    owner: str  # the LLMDataDist: "process/cluster c"
    cluster: Optional[int]
    version: int  # 1: KvCacheManager, 2: CacheManager (0: LLMDataDist itself)
    start: Point
    end: Optional[Point]
    peers: FrozenSet[int] = frozenset()
    seen_at: str = ""  # a task: where a thread saw it finish

    def locks(self):
        """The holds that cover the whole call (a hold of one thread at both ends)."""
        if self.end is None:
            return frozenset()
        return self.start.locks & self.end.locks

    def describe(self):
        s = self.start
        text = (f"{s.process} thread {s.thread_name!r} at {s.where}: {self.api}"
                + (f" to cluster(s) {', '.join(map(str, sorted(self.peers)))}" if self.peers
                   else ""))
        if self.api == "transfer_cache_async":
            text += (f" (task seen finished at {self.seen_at})" if self.end is not None
                     else " (no thread saw its task finish)")
        return text


def ordered(a, b):
    """True if the programs order calls a and b."""
    if a.end is not None and a.end.before(b.start):
        return True
    if b.end is not None and b.end.before(a.start):
        return True
    shared = {(p, k) for p, k, _ in a.locks()} & {(p, k) for p, k, _ in b.locks()}
    return bool(shared)


@dataclass
class Finding:
    rule: str
    first: Call
    second: Call
    count: int = 1

    def lines(self):
        return [f"kvsim launch: rule broken ({self.rule}): two calls that must not overlap are "
                f"not ordered by the programs"
                + (f" ({self.count} pairs like this)" if self.count > 1 else ""),
                f"  {self.first.describe()}",
                f"  {self.second.describe()}",
                f"  rule: {RULES[self.rule]}"]

    def to_json(self):
        def call(c):
            return {"api": c.api, "process": c.start.process, "thread": c.start.thread_name,
                    "where": c.start.where, "owner": c.owner, "peers": sorted(c.peers),
                    "seen_finished_at": c.seen_at or None}
        return {"rule": self.rule, "pairs": self.count, "first": call(self.first),
                "second": call(self.second), "why": RULES[self.rule]}


@dataclass
class Checker:
    """Collects the programs' calls (kvsim.launch.python_calls) and judges them at the end."""
    calls: list = field(default_factory=list)
    _tasks: dict = field(default_factory=dict)  # id(CacheTask) -> (task, Call)
    _owners: dict = field(default_factory=dict)  # id(manager) -> (manager, owner, cluster, version)

    def point(self, process, context):
        thread, clock, locks, name, where = context
        return Point(thread=thread, clock=decode_clock(clock),
                     locks=frozenset((process, k, s) for k, s in locks), process=process,
                     thread_name=name, where=where)

    def owner_of(self, process, obj):
        """(owner, cluster, version) of an LLMDataDist or one of its managers."""
        known = self._owners.get(id(obj))
        if known is not None and known[0] is obj:
            return known[1:]
        cluster = getattr(obj, "cluster_id", None)
        owner = f"{process}/cluster {cluster}" if cluster is not None else f"{process}"
        return owner, cluster, 0

    def got(self, process, obj, name, value):
        """An attribute read: an LLMDataDist's managers belong to it."""
        if name in ("cache_manager", "kv_cache_manager") and value is not None:
            owner, cluster, _ = self.owner_of(process, obj)
            self._owners[id(value)] = (value, owner, cluster, 1 if name == "kv_cache_manager"
                                       else 2)

    def call(self, process, obj, name, configs, args, kwargs, context, result):
        """A call that returned (or raised: `result` is the exception)."""
        if context is None:
            return
        at = self.point(process, context)
        kind = type(obj).__name__
        if kind == "CacheTask":
            if name in ("synchronize", "get_results"):
                self._seen(obj, at)
            return
        owner, cluster, version = self.owner_of(process, obj)
        if name == "transfer_cache_async":
            c = Call(api=name, owner=owner, cluster=cluster, version=version, start=at, end=None,
                     peers=frozenset(getattr(cfg, "dst_cluster_id", None) for cfg in configs)
                     - {None})
            self.calls.append(c)
            if not isinstance(result, BaseException) and result is not None:
                self._tasks[id(result)] = (result, c)
            return
        peers = frozenset()
        if name in _PULLS and args:
            key = args[0]
            peer = getattr(key, "prompt_cluster_id", None)  # CacheKey, BlocksCacheKey
            if peer is None:
                peer = getattr(key, "cluster_id", None)  # CacheKeyByIdAndIndex
            peers = frozenset({peer}) if peer is not None else frozenset()
        self.calls.append(Call(api=name, owner=owner, cluster=cluster, version=version,
                               start=at, end=at, peers=peers))

    def _seen(self, task, at):
        entry = self._tasks.get(id(task))
        if entry is None or entry[0] is not task:
            return
        c = entry[1]
        if c.end is not None or not _finished(task):
            return
        c.end = at
        c.seen_at = f"{at.process} thread {at.thread_name!r} at {at.where}"

    def findings(self):
        """Every forbidden pair the programs do not order, one finding per pair of lines."""
        found = {}

        def add(rule, a, b):
            if ordered(a, b):
                return
            a, b = sorted((a, b), key=lambda c: (c.start.process, c.start.where))
            key = (rule, a.start.where, a.api, b.start.where, b.api)
            if key in found:
                found[key].count += 1
            else:
                found[key] = Finding(rule, a, b)

        transfers = [c for c in self.calls if c.api == "transfer_cache_async"]
        for i, a in enumerate(transfers):
            for b in transfers[i + 1:]:
                if a.owner == b.owner:
                    add("ConcurrentTransfer", a, b)
        for t in transfers:
            if t.version != 1 or t.cluster is None:
                continue
            for p in self.calls:
                if p.api not in _PULLS:
                    continue
                # Either end: this side pulls from a peer it transfers to, or the peer pulls
                # from this side.
                if (p.owner == t.owner and p.peers & t.peers) or \
                        (p.cluster in t.peers and t.cluster in p.peers):
                    add("LinkCallOverlap", t, p)
        for f in (c for c in self.calls if c.api == "finalize"):
            for c in self.calls:
                if c is not f and c.owner == f.owner:
                    add("FinalizeWhileBusy", c, f)
        return sorted(found.values(), key=lambda f: (f.rule, f.first.start.where,
                                                     f.second.start.where))


def _finished(task):
    """True if a CacheTask's job has ended (its synchronize would not time out)."""
    done = getattr(task, "done", None)
    if done is not None:
        return bool(done() if callable(done) else done)
    return True


def write_report(path, findings):
    """rules.json: the findings, for CI."""
    with open(path, "w") as f:
        json.dump({"rules_broken": len(findings),
                   "findings": [x.to_json() for x in findings]}, f, indent=2)
        f.write("\n")
