"""The prompt keeps requests in a contiguous cache (one row per request, registered with its
CacheKeys); the decoder keeps paged-attention blocks and pulls each request's row into blocks of
its own choice with pull_blocks and a CacheKey source: the row is cut into block-sized pieces,
piece j landing in dst_blocks[j]. The comm domain's v1.2 rank table is built at run time: each
process asks hccn_tool for its NPU's address and the two exchange (host, device, address) with
torch.distributed.all_gather_object. The decoder checks every block of every tensor.

    kvsim launch --hosts 10.40.1.1,10.40.2.1 --device-ips 0=192.168.40.11 --device-ips 1=192.168.41.11 -- \\
        python3 pull_cache_to_blocks.py --cluster_id 1 --device_id 1 --host_ip 10.40.1.1 --master_ip 10.40.1.1 ::: \\
        python3 pull_cache_to_blocks.py --cluster_id 2 --device_id 6 --host_ip 10.40.2.1 --master_ip 10.40.1.1
"""
import argparse
import datetime
import json
import logging
import os
import subprocess
import time

import torch
import torch.distributed as dist
from llm_datadist import (CacheDesc, CacheKey, DataType, LLMConfig, LLMDataDist, LLMRole,
                          Placement, RegisterMemStatus)

logging.basicConfig(format="%(asctime)s %(message)s", level=logging.INFO)

LAYERS = 3
BLOCK_ELEMS = 256                    # int32 elements per decoder block (1 KiB)
ROW_BLOCKS = 3                       # a prompt row is as long as three blocks
DECODER_BLOCKS = 10
REQUESTS = (7001, 7002)              # rows 0 and 1 of the prompt's cache
PLAN = {7002: [6, 2, 9],             # request -> decoder blocks for its row's pieces
        7001: [0, 1]}                # (only the first two thirds of request 7001's row)
EMPTY = -1


def row_of(request, tensor):
    """Request `request`'s row of tensor `tensor`: every element of every row is different."""
    n = torch.arange(ROW_BLOCKS * BLOCK_ELEMS, dtype=torch.int32)
    return (request % 100) * 1000000 + tensor * 10000 + n


def my_npu_ip(device_id):
    text = subprocess.check_output(["hccn_tool", "-i", str(device_id), "-ip", "-g"], text=True)
    return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)["ipaddr"]


def build_rank_table(device_id, host_ip):
    me = {"host_ip": host_ip, "device_id": str(device_id), "device_ip": my_npu_ip(device_id)}
    everyone = [None, None]
    dist.all_gather_object(everyone, me)
    servers = [{"server_id": peer["host_ip"], "host_ip": peer["host_ip"],
                "device": [{"device_id": peer["device_id"], "device_ip": peer["device_ip"],
                            "rank_id": str(rank)}]}
               for rank, peer in enumerate(everyone)]
    logging.info("rank table devices: %s", [(p["host_ip"], p["device_ip"]) for p in everyone])
    return json.dumps({"version": "1.2", "status": "completed", "server_count": "2",
                       "server_list": servers})


def wait_for_domain(datadist, comm_id):
    for attempt in range(1, 31):
        status = datadist.query_register_mem_status(comm_id)
        if status == RegisterMemStatus.OK:
            return
        if status == RegisterMemStatus.FAILED:
            break
        logging.info("waiting for the comm domain (attempt %d)", attempt)
        time.sleep(1)
    raise RuntimeError(f"comm domain {comm_id} did not come up")


def prompt(datadist, comm_name, table):
    manager = datadist.cache_manager
    tensors = [torch.stack([row_of(r, t) for r in REQUESTS]).npu() for t in range(2 * LAYERS)]
    desc = CacheDesc(2 * LAYERS, [len(REQUESTS), ROW_BLOCKS * BLOCK_ELEMS], DataType.DT_INT32,
                     Placement.DEVICE)
    keys = [CacheKey(prompt_cluster_id=1, req_id=r) for r in REQUESTS]
    cache = manager.register_cache(desc, [t.data_ptr() for t in tensors], keys)
    logging.info("prompt registered rows for requests %s", list(REQUESTS))
    comm_id = datadist.link(comm_name, {1: 0, 2: 1}, table)
    wait_for_domain(datadist, comm_id)
    dist.barrier()  # rows ready
    dist.barrier()  # decoder pulled
    datadist.unlink(comm_id)
    dist.barrier()  # unlinked
    manager.unregister_cache(cache.cache_id)
    datadist.finalize()


def decoder(datadist, comm_name, table):
    manager = datadist.cache_manager
    tensors = [torch.full((DECODER_BLOCKS, BLOCK_ELEMS), EMPTY, dtype=torch.int32).npu()
               for _ in range(2 * LAYERS)]
    desc = CacheDesc(2 * LAYERS, [DECODER_BLOCKS, BLOCK_ELEMS], DataType.DT_INT32,
                     Placement.DEVICE)
    cache = manager.register_blocks_cache(desc, [t.data_ptr() for t in tensors])
    comm_id = datadist.link(comm_name, {1: 0, 2: 1}, table)
    wait_for_domain(datadist, comm_id)
    dist.barrier()  # rows ready

    for request, blocks in PLAN.items():
        manager.pull_blocks(CacheKey(prompt_cluster_id=1, req_id=request), cache,
                            src_blocks=[], dst_blocks=blocks)
        logging.info("request %d: row pulled into blocks %s", request, blocks)

    for t, tensor in enumerate(tensors):
        want = torch.full((DECODER_BLOCKS, BLOCK_ELEMS), EMPTY, dtype=torch.int32)
        for request, blocks in PLAN.items():
            pieces = row_of(request, t).view(ROW_BLOCKS, BLOCK_ELEMS)
            for piece, block in enumerate(blocks):
                want[block] = pieces[piece]
        got = tensor.cpu()
        diff = (got != want).any(dim=1).nonzero().flatten().tolist()
        if diff:
            raise RuntimeError(f"tensor {t}: blocks {diff} are wrong, e.g. block {diff[0]} "
                               f"starts {got[diff[0]][:12].tolist()}")
    logging.info("decoder verified %d blocks x %d tensors (%d written by pull_blocks)",
                 DECODER_BLOCKS, len(tensors), sum(map(len, PLAN.values())))
    dist.barrier()  # decoder pulled
    datadist.unlink(comm_id)
    dist.barrier()  # unlinked
    manager.unregister_cache(cache.cache_id)
    datadist.finalize()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--cluster_id", type=int, choices=(1, 2), required=True)
    parser.add_argument("--device_id", type=int, required=True)
    parser.add_argument("--host_ip", required=True, help="this server's host address")
    parser.add_argument("--master_ip", required=True, help="the prompt server's host address")
    args = parser.parse_args()
    torch.npu.set_device(args.device_id)
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = args.master_ip, "29650"
    dist.init_process_group("gloo", rank=args.cluster_id - 1, world_size=2,
                            timeout=datetime.timedelta(seconds=60))
    dd = LLMDataDist(LLMRole.PROMPT if args.cluster_id == 1 else LLMRole.DECODER, args.cluster_id)
    cfg = LLMConfig()
    cfg.device_id = args.device_id
    cfg.enable_cache_manager = True
    dd.init(cfg.generate_options())
    rank_table = build_rank_table(args.device_id, args.host_ip)
    name = "c2b_" + "_".join(json.loads(rank_table)["server_list"][i]["host_ip"] for i in (0, 1))
    (prompt if args.cluster_id == 1 else decoder)(dd, name, rank_table)
    logging.info("cluster %d done", args.cluster_id)
