"""A P/D pair in the shape of a serving engine's llm_datadist KV connector worker (vllm-ascend's
LLMDataDistCMgrConnector, omni-npu's): threads and sockets, not barriers.

Prefill (--role p): registers a blocks cache holding every request's KV, then serves agent
metadata to any decoder from a daemon listener thread and counts the decoders' "finished"
reports under a threading.Lock; its main thread waits on a threading.Event until every request
was reported, then leaves.
Decode (--role d): asks the prefill for its metadata from a listener thread, which links to it
(add_remote_agent) and sets a ready Event; the main thread waits for it, then pulls each
request's blocks on a ThreadPoolExecutor(1), checks every byte, and reports "finished" for each
over the socket.

--transport tcp speaks length-prefixed JSON over stdlib sockets; --transport zmq uses ZeroMQ
(Debian's python3-zmq): a ROUTER on the prefill, a DEALER per decoder. --race (decode) plants a
shutdown bug: finalize after a sleep rather than after the pulls. The pulls end within the
sleep, so the run passes and every byte checks, but nothing orders finalize after them: kvsim
launch reports it (FinalizeWhileBusy), and --strict fails the launch.

    kvsim launch --hosts 10.90.0.1,10.90.0.2 -- \\
        python3 pd_connector.py --role p --host 10.90.0.1 ::: \\
        python3 pd_connector.py --role d --host 10.90.0.2 --prefill 10.90.0.1
"""
import argparse
import json
import logging
import socket
import struct
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import torch
from llm_datadist import (BlocksCacheKey, CacheDesc, DataType, LLMClusterInfo, LLMConfig,
                          LLMDataDist, LLMRole, LLMStatusCode, Placement)

logging.basicConfig(format="%(asctime)s %(threadName)s %(message)s", level=logging.INFO)

LAYERS = 4
TENSORS = 2 * LAYERS        # K and V per layer
BLOCK_ELEMS = 128           # int16 per block row
BLOCKS_PER_REQUEST = 3
REQUESTS = 6
PREFILL_ID, DECODE_ID = 1, 2
LLM_PORT = 26000            # llm_datadist's listen port on the prefill
SIDE_PORT = 5569            # the connector's own side channel


def block_value(request, tensor, block):
    """What a prefill block holds: request, tensor and block in one int16 row."""
    base = ((request * TENSORS + tensor) * BLOCKS_PER_REQUEST + block) * 7
    return (base + torch.arange(BLOCK_ELEMS, dtype=torch.int32)) % 30000


def blocks_desc(blocks):
    return CacheDesc(TENSORS, [blocks, BLOCK_ELEMS], DataType.DT_INT16, Placement.DEVICE)


def open_datadist(role, cluster_id, listen=None):
    datadist = LLMDataDist(role, cluster_id)
    config = LLMConfig()
    config.device_id = 0
    config.enable_cache_manager = True
    if listen:
        config.listen_ip_info = listen
    datadist.init(config.generate_options())
    return datadist


# The side channel: messages are dicts, over TCP (4-byte length + JSON) or ZeroMQ frames.

class TcpServer:
    def __init__(self, host):
        self.sock = socket.create_server((host, SIDE_PORT))

    def serve(self, handle):
        while True:
            conn, _ = self.sock.accept()
            threading.Thread(target=self._peer, args=(conn, handle), daemon=True,
                             name="side-peer").start()

    @staticmethod
    def _peer(conn, handle):
        with conn:
            while True:
                msg = tcp_recv(conn)
                if msg is None:
                    return
                reply = handle(msg)
                if reply is not None:
                    tcp_send(conn, reply)


def tcp_send(conn, msg):
    data = json.dumps(msg).encode()
    conn.sendall(struct.pack("!I", len(data)) + data)


def tcp_recv(conn):
    head = conn.recv(4, socket.MSG_WAITALL)
    if len(head) < 4:
        return None
    (n,) = struct.unpack("!I", head)
    return json.loads(conn.recv(n, socket.MSG_WAITALL))


class TcpClient:
    def __init__(self, prefill):
        deadline = time.monotonic() + 30
        while True:  # the prefill may not listen yet: retry, as engines' side channels do
            try:
                self.conn = socket.create_connection((prefill, SIDE_PORT), timeout=30)
                break
            except ConnectionRefusedError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        self.lock = threading.Lock()

    def ask(self, msg):
        with self.lock:
            tcp_send(self.conn, msg)
            return tcp_recv(self.conn)

    def tell(self, msg):
        with self.lock:
            tcp_send(self.conn, msg)


class ZmqServer:
    def __init__(self, host):
        import zmq
        self.zmq = zmq
        self.sock = zmq.Context.instance().socket(zmq.ROUTER)
        self.sock.bind(f"tcp://{host}:{SIDE_PORT}")

    def serve(self, handle):
        while True:
            peer, data = self.sock.recv_multipart()
            reply = handle(json.loads(data))
            if reply is not None:
                self.sock.send_multipart([peer, json.dumps(reply).encode()])


class ZmqClient:
    def __init__(self, prefill):
        import zmq
        self.sock = zmq.Context.instance().socket(zmq.DEALER)
        self.sock.connect(f"tcp://{prefill}:{SIDE_PORT}")
        self.lock = threading.Lock()

    def ask(self, msg):
        with self.lock:
            self.sock.send(json.dumps(msg).encode())
            return json.loads(self.sock.recv())

    def tell(self, msg):
        with self.lock:
            self.sock.send(json.dumps(msg).encode())


def prefill(args):
    datadist = open_datadist(LLMRole.PROMPT, PREFILL_ID, f"{args.host}:{LLM_PORT}")
    blocks = REQUESTS * BLOCKS_PER_REQUEST
    tensors = [torch.stack([block_value(r, t, b) for r in range(REQUESTS)
                            for b in range(BLOCKS_PER_REQUEST)]).to(torch.int16).npu()
               for t in range(TENSORS)]
    cache = datadist.cache_manager.register_blocks_cache(
        blocks_desc(blocks), [t.data_ptr() for t in tensors], BlocksCacheKey(PREFILL_ID, 0))
    finished = set()
    lock = threading.Lock()
    all_done = threading.Event()

    def handle(msg):
        if msg["kind"] == "metadata":
            return {"cluster_id": PREFILL_ID, "ip": args.host, "port": LLM_PORT,
                    "blocks": {str(r): [r * BLOCKS_PER_REQUEST + b
                                        for b in range(BLOCKS_PER_REQUEST)]
                               for r in range(REQUESTS)}}
        if msg["kind"] == "finished":
            with lock:
                finished.add(msg["request"])
                if len(finished) == REQUESTS:
                    all_done.set()
            return None
        raise ValueError(f"unknown message {msg}")

    server = (ZmqServer if args.transport == "zmq" else TcpServer)(args.host)
    threading.Thread(target=server.serve, args=(handle,), daemon=True, name="listener").start()
    logging.info("prefill: %d requests registered, listening on %s:%d", REQUESTS, args.host,
                 SIDE_PORT)
    if not all_done.wait(timeout=60):
        raise RuntimeError(f"only {len(finished)} of {REQUESTS} requests were reported finished")
    logging.info("prefill: every request was reported finished")
    decoder = LLMClusterInfo()  # this end of the decoder's link goes before the cache does
    decoder.remote_cluster_id = DECODE_ID
    datadist.unlink_clusters([decoder], 5000, force=True)
    datadist.cache_manager.unregister_cache(cache.cache_id)
    datadist.finalize()


def decode(args):
    datadist = open_datadist(LLMRole.DECODER, DECODE_ID)
    blocks = REQUESTS * BLOCKS_PER_REQUEST  # each request its own blocks, as an engine's pool
    tensors = [torch.full((blocks, BLOCK_ELEMS), -1, dtype=torch.int16).npu()
               for _ in range(TENSORS)]
    cache = datadist.cache_manager.register_blocks_cache(
        blocks_desc(blocks), [t.data_ptr() for t in tensors],
        BlocksCacheKey(DECODE_ID, 0))
    client = (ZmqClient if args.transport == "zmq" else TcpClient)(args.prefill)
    ready = threading.Event()
    agent = {}

    def add_remote_agent():  # the listener thread: metadata, then the link
        meta = client.ask({"kind": "metadata"})
        info = LLMClusterInfo()
        info.remote_cluster_id = meta["cluster_id"]
        info.append_local_ip_info(args.host, 0)
        info.append_remote_ip_info(meta["ip"], meta["port"])
        ret, _ = datadist.link_clusters([info], 5000)
        if ret != LLMStatusCode.LLM_SUCCESS:
            raise RuntimeError(f"link_clusters: {ret}")
        agent.update(meta, info=info)
        ready.set()

    threading.Thread(target=add_remote_agent, daemon=True, name="listener").start()
    if not ready.wait(timeout=30):
        raise RuntimeError("no metadata from the prefill")
    logging.info("decode: linked to prefill cluster %d", agent["cluster_id"])

    def pull(request):
        src = agent["blocks"][str(request)]
        dst = [BLOCKS_PER_REQUEST * (REQUESTS - 1 - request) + b  # not the prefill's layout
               for b in range(BLOCKS_PER_REQUEST)]
        datadist.cache_manager.pull_blocks(BlocksCacheKey(agent["cluster_id"], 0), cache,
                                           src_blocks=src, dst_blocks=dst)
        for t, tensor in enumerate(tensors):
            got = tensor.cpu()
            for b in range(BLOCKS_PER_REQUEST):
                if not torch.equal(got[dst[b]], block_value(request, t, b).to(torch.int16)):
                    raise RuntimeError(f"request {request}, tensor {t}, block {b}: wrong bytes")
        client.tell({"kind": "finished", "request": request})
        return request

    with ThreadPoolExecutor(1, thread_name_prefix="pull") as pool:
        if args.race:
            # The bug --race plants: shut down after a pause that "is always long enough"
            # instead of waiting for the pulls. They do finish within it here, so the run
            # passes; kvsim launch still reports finalize as unordered with every pull.
            for request in range(REQUESTS):
                pool.submit(pull, request)
            time.sleep(1.0)
            done = "(not waited for)"
        else:
            done = list(pool.map(pull, range(REQUESTS)))
        logging.info("decode: pulled and checked requests %s", done)
        datadist.unlink_clusters([agent["info"]], 5000, force=True)
        datadist.cache_manager.unregister_cache(cache.cache_id)
        datadist.finalize()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--role", choices=("p", "d"), required=True)
    parser.add_argument("--host", required=True, help="this worker's host address")
    parser.add_argument("--prefill", help="the prefill's host address (decode only)")
    parser.add_argument("--transport", choices=("tcp", "zmq"), default="tcp")
    parser.add_argument("--race", action="store_true",
                        help="decode: finalize after a sleep instead of waiting for the pulls "
                             "(a concurrency bug that kvsim launch reports)")
    cli = parser.parse_args()
    torch.npu.set_device(0)
    (prefill if cli.role == "p" else decode)(cli)
