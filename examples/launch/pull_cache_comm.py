"""The decoder pulls requests' KV rows by CacheKey over an HCCL comm domain. Both clusters call
link() with the same v1.2 rank table, written from the two servers' hard-coded host and device
addresses, and poll query_register_mem_status once a second until the domain is up. The prompt
takes its cache from its memory pool with allocate_cache, one CacheKey per row, fills the rows
from NPU tensors with copy_cache, and removes the keys after the decoder is done (the key the
decoder did not pull is released that way). The decoder pulls two of the three requests into
other rows of its own cache and checks every row.

    kvsim launch --hosts 10.20.0.11,10.20.0.12 --device-ips 0=172.16.1.1 --device-ips 1=172.16.2.1 -- \\
        python3 pull_cache_comm.py --cluster_id 1 --device_id 3 ::: \\
        python3 pull_cache_comm.py --cluster_id 2 --device_id 3
"""
import argparse
import datetime
import json
import logging
import os
import time

import torch
import torch.distributed as dist
from llm_datadist import (CacheDesc, CacheKey, DataType, LLMConfig, LLMDataDist, LLMRole,
                          Placement, RegisterMemStatus)

logging.basicConfig(format="%(asctime)s %(message)s", level=logging.INFO)

SERVERS = {  # cluster id -> the server it runs on
    1: {"host_ip": "10.20.0.11", "device_ips": [f"172.16.1.{i}" for i in range(1, 9)]},
    2: {"host_ip": "10.20.0.12", "device_ips": [f"172.16.2.{i}" for i in range(1, 9)]},
}
PROMPT, DECODER = 1, 2
LAYERS = 2
ROW_ELEMS = 8 * 1024                 # bfloat16 elements per row (16 KiB)
REQUESTS = [501, 502, 503]           # the prompt's rows 0, 1, 2 hold these requests
PULLS = {501: 2, 502: 0}             # request -> the decoder row it lands in
POOL_BYTES = 16 * 1024 * 1024


def row_values(request, tensor):
    """Request `request`'s row of tensor `tensor`, as bfloat16 bit patterns (int16)."""
    seed = (request * 131 + tensor * 17) % 997
    return ((torch.arange(ROW_ELEMS, dtype=torch.int32) * 7 + seed) % 30000).to(torch.int16)


def desc(rows):
    return CacheDesc(2 * LAYERS, [rows, ROW_ELEMS], DataType.DT_BF16, Placement.DEVICE)


def rank_table(device_id):
    servers = []
    for cluster_id in (PROMPT, DECODER):
        server = SERVERS[cluster_id]
        servers.append({
            "server_id": server["host_ip"],
            "host_ip": server["host_ip"],
            "device": [{"device_id": str(device_id),
                        "device_ip": server["device_ips"][device_id],
                        "rank_id": str(cluster_id - 1)}],
        })
    return json.dumps({"version": "1.2", "status": "completed",
                       "server_count": str(len(servers)), "server_list": servers})


def link_domain(datadist, device_id):
    comm_id = datadist.link("pull_cache_domain", {PROMPT: 0, DECODER: 1}, rank_table(device_id))
    polls = 0
    while True:
        status = datadist.query_register_mem_status(comm_id)
        if status == RegisterMemStatus.OK:
            logging.info("comm domain %d is up after %d poll(s)", comm_id, polls + 1)
            return comm_id
        if status == RegisterMemStatus.FAILED:
            raise RuntimeError(f"comm domain {comm_id} failed to form")
        polls += 1
        time.sleep(1)


def prompt(datadist, device_id):
    manager = datadist.cache_manager
    comm_id = link_domain(datadist, device_id)
    keys = [CacheKey(prompt_cluster_id=PROMPT, req_id=r, model_id=0) for r in REQUESTS]
    cache = manager.allocate_cache(desc(len(REQUESTS)), keys)
    logging.info("allocated cache %d from the pool with keys for requests %s",
                 cache.cache_id, REQUESTS)
    # The model's output, staged in NPU tensors, goes into the pooled cache row by row.
    staged = [torch.stack([row_values(r, t) for r in REQUESTS]).view(torch.bfloat16).npu()
              for t in range(2 * LAYERS)]
    staging = manager.register_cache(desc(len(REQUESTS)), [t.data_ptr() for t in staged])
    for row in range(len(REQUESTS)):
        manager.copy_cache(cache, staging, dst_batch_index=row, src_batch_index=row)
    manager.unregister_cache(staging.cache_id)

    dist.barrier()  # cache ready
    dist.barrier()  # decoder pulled
    datadist.unlink(comm_id)
    dist.barrier()  # both unlinked
    for key in keys:
        manager.remove_cache_key(key)
    manager.deallocate_cache(cache)
    logging.info("prompt removed its keys and deallocated its cache")
    datadist.finalize()


def decoder(datadist, device_id):
    manager = datadist.cache_manager
    rows = len(REQUESTS)
    filler = torch.full((rows, ROW_ELEMS), 0x7F7F, dtype=torch.int16)
    tensors = [filler.clone().view(torch.bfloat16).npu() for _ in range(2 * LAYERS)]
    cache = manager.register_cache(desc(rows), [t.data_ptr() for t in tensors])
    comm_id = link_domain(datadist, device_id)

    dist.barrier()  # cache ready
    for request, row in PULLS.items():
        manager.pull_cache(CacheKey(prompt_cluster_id=PROMPT, req_id=request), cache,
                           batch_index=row)
        logging.info("pulled request %d into row %d", request, row)

    bad = []
    for t, tensor in enumerate(tensors):
        got = tensor.cpu().view(torch.int16)
        want = filler.clone()
        for request, row in PULLS.items():
            want[row] = row_values(request, t)
        for row in range(rows):
            if not torch.equal(got[row], want[row]):
                first = int((got[row] != want[row]).nonzero()[0])
                bad.append(f"tensor {t} row {row} element {first}: {int(got[row][first])} "
                           f"!= {int(want[row][first])}")
    if bad:
        raise RuntimeError("pulled rows are wrong: " + "; ".join(bad))
    logging.info("decoder verified %d tensors x %d rows (%d bytes pulled)", len(tensors), rows,
                 len(PULLS) * len(tensors) * ROW_ELEMS * 2)

    dist.barrier()  # decoder pulled
    datadist.unlink(comm_id)
    dist.barrier()  # both unlinked
    manager.unregister_cache(cache.cache_id)
    datadist.finalize()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cluster_id", type=int, choices=[PROMPT, DECODER], required=True)
    parser.add_argument("--device_id", type=int, default=0, choices=range(8))
    args = parser.parse_args()
    logging.info("cluster %d starting on device %d", args.cluster_id, args.device_id)
    torch.npu.set_device(args.device_id)
    os.environ["MASTER_ADDR"] = SERVERS[PROMPT]["host_ip"]
    os.environ["MASTER_PORT"] = "29630"
    dist.init_process_group("gloo", rank=args.cluster_id - 1, world_size=2,
                            timeout=datetime.timedelta(seconds=60))
    role = LLMRole.PROMPT if args.cluster_id == PROMPT else LLMRole.DECODER
    datadist = LLMDataDist(role, args.cluster_id)
    config = LLMConfig()
    config.device_id = args.device_id
    config.enable_cache_manager = True
    if args.cluster_id == PROMPT:
        config.mem_pool_cfg = json.dumps({"memory_size": POOL_BYTES})
    datadist.init(config.generate_options())
    if args.cluster_id == PROMPT:
        prompt(datadist, args.device_id)
    else:
        decoder(datadist, args.device_id)
    logging.info("cluster %d done", args.cluster_id)


if __name__ == "__main__":
    main()
