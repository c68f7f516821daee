"""torch.distributed among the processes of a launch, in simulated time.

Hosted programs synchronise as the official samples do: ``init_process_group`` (gloo or hccl,
``env://`` with MASTER_ADDR/MASTER_PORT or ``tcp://``), ``barrier``, ``broadcast``,
``all_gather``, ``all_reduce`` and the object collectives. Processes that name the same
rendezvous address form a group; a collective ends for every member COLLECTIVE_LATENCY after the
last member called it. As with gloo, rank 0 serves the rendezvous on its own host, so the
members find it only if it runs on the host that owns MASTER_ADDR; a member that waits longer
than the group's timeout gets torch's error. With real torch, ``patch(torch.distributed)`` puts these functions in place of
torch's; the numpy stand-in imports them as its torch.distributed.
"""
import datetime
import pickle

import kvsim
from kvsim import _core
from kvsim.hosting import context

#: One collective's cost once every member has called it: a gloo round trip over the hosts'
#: TCP network [I] (kvsim does not model the front-end network).
COLLECTIVE_LATENCY = 50e-6
default_pg_timeout = datetime.timedelta(minutes=30)
_LOCAL = {"127.0.0.1", "localhost", "0.0.0.0", ""}


class ReduceOp:
    """The reductions of all_reduce (torch.distributed.ReduceOp)."""
    SUM, PRODUCT, MIN, MAX, AVG = "SUM", "PRODUCT", "MIN", "MAX", "AVG"


class Backend(str):
    """Backend names (torch.distributed.Backend)."""
    GLOO, NCCL, HCCL, MPI = "gloo", "nccl", "hccl", "mpi"


class GroupMember:
    WORLD = None
    NON_GROUP_MEMBER = object()


class Work:
    """The handle of an async_op collective; it has completed when returned."""

    def wait(self, timeout=None):
        return True

    def is_completed(self):
        return True

    def is_success(self):
        return True


class _Rendezvous:
    def __init__(self, key, world_size):
        self.key, self.world_size = key, world_size
        self.members = {}              # rank -> process name
        self.complete = kvsim.Event()
        self.group = None              # the default group, once complete
        self.groups = {}               # new_group's groups by their ranks


class ProcessGroup:
    """A set of global ranks that run collectives together."""

    def __init__(self, rendezvous, ranks, backend, timeout):
        self.rendezvous, self.ranks = rendezvous, list(ranks)
        self.backend, self.timeout = backend, timeout
        self.ops = {}                  # sequence number -> _Collective

    def __repr__(self):
        host, port = self.rendezvous.key
        return f"ProcessGroup({host}:{port}, ranks={self.ranks})"


class _Collective:
    def __init__(self, kind):
        self.kind = kind
        self.inputs = {}               # group rank -> input
        self.done = kvsim.Event()
        self.result = None


class _State:
    """One process's view: its default group and the collectives it has called per group."""

    def __init__(self):
        self.group = None              # the default ProcessGroup
        self.rank = -1
        self.sequence = {}             # id(group) -> next sequence number


# Rendezvous servers by (host, port) and the events that tell clients one is up, per world.
_rendezvous = {"servers": {}, "up": {}}
_rendezvous_world = [None]


def _state():
    return context.process_state("torch.distributed", _State)


def _rendezvous_table():
    world = _core.current_world()
    if _rendezvous_world[0] is not world:
        _rendezvous["servers"].clear()
        _rendezvous["up"].clear()
        _rendezvous_world[0] = world
    return _rendezvous


def _timeout_seconds(timeout):
    if isinstance(timeout, datetime.timedelta):
        return timeout.total_seconds()
    return float(timeout)


def _waiting(text):
    ctx = context.current()
    if ctx is not None:
        ctx.state["waiting"] = text


def _endpoint(init_method):
    import os
    if init_method is None or init_method == "env://":
        host, port = os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT")
        for name, value in (("MASTER_ADDR", host), ("MASTER_PORT", port)):
            if value is None:
                raise ValueError("Error initializing torch.distributed using env:// rendezvous: "
                                 f"environment variable {name} expected, but not set")
        return host, int(port)
    if init_method.startswith("tcp://"):
        host, _, port = init_method[len("tcp://"):].rpartition(":")
        return host.strip("[]"), int(port)
    if init_method.startswith("file://"):
        return init_method, 0
    raise ValueError(f"kvsim launch: init_method {init_method!r} is not env://, tcp:// or file://")


def _int_from(value, env_name):
    import os
    if value is not None and value >= 0:
        return value
    text = os.environ.get(env_name)
    if text is None:
        raise ValueError("Error initializing torch.distributed using env:// rendezvous: "
                         f"environment variable {env_name} expected, but not set")
    return int(text)


def _server_host(host):
    """Which host a member reaches at `host`: a node of the world (its host address, or the
    member's own for a loopback name), or the name itself outside a launch."""
    ctx = context.current()
    if ctx is None or host.startswith("file://"):
        return host
    if host in _LOCAL:
        return ctx.node
    world = _core.current_world()
    for node in range(world.nodes):
        if world.host_ip(node) == host:
            return node
    return None  # an address no simulated host has


def _event(table, key):
    if key not in table:
        table[key] = kvsim.Event()
    return table[key]


def init_process_group(backend=None, init_method=None, timeout=default_pg_timeout,
                       world_size=-1, rank=-1, store=None, group_name="", pg_options=None):
    """Joins the group of the processes that name the same rendezvous; returns when all
    world_size members have joined. As torch's TCPStore: rank 0 serves the rendezvous on every
    address of its own host, and every member (rank 0 too) connects to MASTER_ADDR; a member that
    finds no server there times out with the client socket's TimeoutError, one that finds it
    waits for the others (RuntimeError after `timeout`)."""
    state = _state()
    if state.group is not None:
        raise RuntimeError("trying to initialize the default process group twice!")
    host, port = _endpoint(init_method)
    rank = _int_from(rank, "RANK")
    world_size = _int_from(world_size, "WORLD_SIZE")
    if not 0 <= rank < world_size:
        raise ValueError(f"Invalid rank {rank}, rank should be in the interval [0, "
                         f"{world_size - 1}]")
    seconds = _timeout_seconds(timeout)
    deadline = _core.now_ps() * 1e-12 + seconds
    table = _rendezvous_table()
    ctx = context.current()
    if rank == 0:
        key = (ctx.node if ctx is not None else _server_host(host), port)
        if key in table["servers"]:
            raise RuntimeError(f"The server socket has failed to listen on any local network "
                               f"address. port: {port}, useIpv6: 0, code: -98, name: EADDRINUSE, "
                               "message: address already in use")
        table["servers"][key] = _Rendezvous(key, world_size)
        _event(table["up"], key).set()
    target = (_server_host(host), port)
    _waiting(f"torch.distributed.init_process_group: connecting to {host}:{port}")
    if target[0] is None or not _event(table["up"], target).wait(
            max(0.0, deadline - _core.now_ps() * 1e-12)):
        raise TimeoutError(f"The client socket has timed out after {seconds:g}s while trying to "
                           f"connect to ({host}, {port}).")
    rdv = table["servers"][target]
    if rdv.world_size != world_size:
        raise RuntimeError(f"kvsim launch: world_size {world_size} disagrees with {rdv.world_size} "
                           f"given by rank 0 of {host}:{port}")
    name = ctx.name if ctx is not None else "script"
    if rank in rdv.members:
        raise RuntimeError(f"kvsim launch: rank {rank} of {host}:{port} is taken by "
                           f"'{rdv.members[rank]}'")
    rdv.members[rank] = name
    if len(rdv.members) == world_size:
        rdv.complete.set()
    _waiting(f"torch.distributed.init_process_group({host}:{port}, rank {rank}: "
             f"{len(rdv.members)} of {world_size} joined)")
    if not rdv.complete.wait(max(0.0, deadline - _core.now_ps() * 1e-12)):
        missing = sorted(set(range(world_size)) - set(rdv.members))
        raise RuntimeError(f"Timed out initializing process group in store based barrier on rank "
                           f"{rank}, for key: store_based_barrier_key:1 (world_size={world_size}, "
                           f"worker_count={len(rdv.members)}, timeout={timeout}, "
                           f"missing ranks: {missing})")
    _waiting("")
    kvsim.sleep(COLLECTIVE_LATENCY)
    if rdv.group is None:  # every member runs its collectives on this one object
        rdv.group = ProcessGroup(rdv, range(world_size), str(backend or "gloo").lower(), seconds)
    state.group = rdv.group
    state.rank = rank


def _group(group):
    state = _state()
    if state.group is None:
        raise RuntimeError("Default process group has not been initialized, please make sure to "
                           "call init_process_group.")
    return state, (group if group is not None else state.group)


def _collective(kind, group, value, timeout=None):
    """Runs one collective: contributes `value`, waits for every member (for `timeout` seconds,
    default the group's), returns all inputs by group rank."""
    state, group = _group(group)
    if state.rank not in group.ranks:
        raise RuntimeError(f"kvsim launch: rank {state.rank} is not a member of {group}")
    me = group.ranks.index(state.rank)
    seq = state.sequence.get(id(group), 0)
    state.sequence[id(group)] = seq + 1
    op = group.ops.get(seq)
    if op is None:
        op = group.ops[seq] = _Collective(kind)
    if op.kind != kind:
        raise RuntimeError(f"kvsim launch: collective #{seq} of {group} is {op.kind} on some ranks "
                           f"and {kind} on rank {state.rank}")
    op.inputs[me] = value
    if len(op.inputs) == len(group.ranks):
        op.result = [op.inputs[r] for r in range(len(group.ranks))]
        op.done.set()
        del group.ops[seq]
    _waiting(f"torch.distributed.{kind} ({group}: {len(op.inputs)} of {len(group.ranks)} "
             "arrived)")
    limit = group.timeout if timeout is None else timeout
    if not op.done.wait(limit):
        missing = sorted(group.ranks[r] for r in set(range(len(group.ranks))) - set(op.inputs))
        raise RuntimeError(f"[kvsim gloo] Timed out waiting {int(limit * 1000)}ms for "
                           f"{kind} of {group} (missing ranks: {missing})")
    _waiting("")
    kvsim.sleep(COLLECTIVE_LATENCY)
    return op.result, me


def _snapshot(tensor):
    """A CPU copy of a tensor (CPU or NPU) that later writes to the tensor do not change."""
    return tensor.cpu().clone()


def barrier(group=None, async_op=False, device_ids=None):
    """Waits until every member of the group has called barrier."""
    _collective("barrier", group, None)
    return Work() if async_op else None


def monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
    """barrier that gives up after `timeout` (default: the group's), with RuntimeError naming
    the missing ranks (kvsim names them all, as wait_all_ranks=True does)."""
    _collective("barrier", group, None,
                None if timeout is None else _timeout_seconds(timeout))


def broadcast(tensor, src, group=None, async_op=False):
    """Copies src's tensor into every member's tensor, in place."""
    state, g = _group(group)
    results, _ = _collective("broadcast", group, _snapshot(tensor) if state.rank == src else None)
    tensor.copy_(results[g.ranks.index(src)])
    return Work() if async_op else None


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduces every member's tensor into all of them, in place."""
    results, _ = _collective("all_reduce", group, _snapshot(tensor))
    acc = results[0].clone()
    name = _op_name(op)
    for other in results[1:]:
        if name in ("SUM", "AVG"):
            acc += other
        elif name == "PRODUCT":
            acc *= other
        elif name in ("MIN", "MAX"):
            mask = other < acc if name == "MIN" else other > acc
            acc[mask] = other[mask]
        else:
            raise ValueError(f"kvsim launch: ReduceOp {op} is not supported")
    if name == "AVG":
        acc /= len(results)
    tensor.copy_(acc)
    return Work() if async_op else None


def _op_name(op):
    """"SUM", ... for kvsim's ReduceOp and for real torch's (whose members compare equal)."""
    if isinstance(op, str):
        return op
    for name in ("SUM", "PRODUCT", "MIN", "MAX", "AVG"):
        if op == getattr(type(op), name, object()):
            return name
    raise ValueError(f"kvsim launch: ReduceOp {op!r} is not supported")


def all_gather(tensor_list, tensor, group=None, async_op=False):
    """Fills tensor_list[i] with member i's tensor."""
    results, _ = _collective("all_gather", group, _snapshot(tensor))
    if len(tensor_list) != len(results):
        raise RuntimeError(f"all_gather: tensor_list has {len(tensor_list)} tensors for "
                           f"{len(results)} ranks")
    for out, value in zip(tensor_list, results):
        out.copy_(value)
    return Work() if async_op else None


def all_gather_object(object_list, obj, group=None):
    """Fills object_list[i] with member i's object (pickled, as torch does)."""
    results, _ = _collective("all_gather_object", group, pickle.dumps(obj))
    for i, data in enumerate(results):
        object_list[i] = pickle.loads(data)


def broadcast_object_list(object_list, src=0, group=None, device=None):
    """Replaces object_list's items with src's."""
    state, g = _group(group)
    payload = pickle.dumps(list(object_list)) if state.rank == src else None
    results, _ = _collective("broadcast_object_list", group, payload)
    object_list[:] = pickle.loads(results[g.ranks.index(src)])


def gather_object(obj, object_gather_list=None, dst=0, group=None):
    """Member dst gets every member's object in object_gather_list."""
    state, g = _group(group)
    results, _ = _collective("gather_object", group, pickle.dumps(obj))
    if state.rank == dst:
        object_gather_list[:] = [pickle.loads(data) for data in results]


def new_group(ranks=None, timeout=None, backend=None, pg_options=None):
    """A group of some ranks of the default group (every rank should call it, as in torch)."""
    state, default = _group(None)
    ranks = sorted(ranks) if ranks is not None else list(default.ranks)
    key = tuple(ranks)
    groups = default.rendezvous.groups
    if key not in groups:
        seconds = _timeout_seconds(timeout) if timeout is not None else default.timeout
        groups[key] = ProcessGroup(default.rendezvous, ranks, backend or default.backend, seconds)
    return groups[key] if state.rank in ranks else GroupMember.NON_GROUP_MEMBER


def get_rank(group=None):
    """This process's rank in the group (-1 if it is not a member)."""
    state = _state()
    if state.group is None:
        raise RuntimeError("Default process group has not been initialized, please make sure to "
                           "call init_process_group.")
    g = group if group is not None else state.group
    return g.ranks.index(state.rank) if state.rank in g.ranks else -1


def get_world_size(group=None):
    _, g = _group(group)
    return len(g.ranks)


def get_backend(group=None):
    _, g = _group(group)
    return g.backend


def is_initialized():
    return _state().group is not None


def is_available():
    return True


def is_gloo_available():
    return True


def is_nccl_available():
    return False


def is_hccl_available():
    return True


def destroy_process_group(group=None):
    """Leaves the default group (or forgets `group`)."""
    state = _state()
    if group is None or group is state.group:
        state.group, state.rank = None, -1
        state.sequence.clear()


PUBLIC = ["Backend", "GroupMember", "ReduceOp", "Work", "all_gather", "all_gather_object",
          "all_reduce", "barrier", "broadcast", "broadcast_object_list", "default_pg_timeout",
          "destroy_process_group", "gather_object", "get_backend", "get_rank", "get_world_size",
          "init_process_group", "is_available", "is_gloo_available", "is_hccl_available",
          "is_initialized", "is_nccl_available", "monitored_barrier", "new_group"]
__all__ = PUBLIC


def patch(torch_distributed):
    """Puts these functions in place of real torch's (its ReduceOp, Backend and GroupMember
    stay, and are understood by all_reduce)."""
    for name in PUBLIC:
        if name in ("ReduceOp", "Backend", "GroupMember", "Work", "default_pg_timeout"):
            continue
        setattr(torch_distributed, name, globals()[name])
