"""A decoder pulls 20 requests' KV rows from a prompt over link_clusters, one request per decode
step, as a serving engine does; the prompt waits until the decoder is done. Written twice over:

- careless (the default): every call is assumed to succeed. A link fault during a pull raises
  LLMException out of the decoder, which dies without telling the prompt, and the prompt waits
  at its barrier forever.
- careful (--careful): a pull that fails with a transient status (the link went down, a
  timeout) is retried after a pause, up to a deadline; every pulled row is checked; the decoder
  always tells the prompt it is done and always unlinks and finalizes.

Run either under seeded link faults (the launch files hold the hosts and the fault plan):

    kvsim launch -f careless.yaml --faults 1-8
    kvsim launch -f careful.yaml --faults 1-8
"""
import argparse
import datetime
import logging
import os
import time

import torch
import torch.distributed as dist
from llm_datadist import (CacheDesc, CacheKey, DataType, LLMClusterInfo, LLMConfig, LLMDataDist,
                          LLMException, LLMRole, LLMStatusCode, Placement)

logging.basicConfig(format="%(asctime)s %(message)s", level=logging.INFO)

PROMPT_HOST, DECODER_HOST = "10.40.0.1", "10.40.0.2"
PORT = 26000
LAYERS = 4
ROW_ELEMS = 64 * 1024           # int8 bytes per row and tensor: 64 KiB, 512 KiB per request
REQUESTS = list(range(100, 120))
STEP = 0.002                    # a decode step between pulls (simulated seconds)
TRANSIENT = {LLMStatusCode.LLM_SUSPECT_REMOTE_ERROR, LLMStatusCode.LLM_TIMEOUT}
RETRY_PAUSE, RETRY_FOR = 0.005, 1.0


def row(request, tensor):
    return ((torch.arange(ROW_ELEMS, dtype=torch.int32) * 3 + request * 7 + tensor) % 251
            ).to(torch.int8)


def desc(rows):
    return CacheDesc(2 * LAYERS, [rows, ROW_ELEMS], DataType.DT_INT8, Placement.DEVICE)


def prompt(datadist):
    tensors = [torch.stack([row(r, t) for r in REQUESTS]).npu() for t in range(2 * LAYERS)]
    keys = [CacheKey(prompt_cluster_id=1, req_id=r) for r in REQUESTS]
    cache = datadist.cache_manager.register_cache(desc(len(REQUESTS)),
                                                  [t.data_ptr() for t in tensors], keys)
    dist.barrier()  # rows ready, listening
    dist.barrier()  # the decoder is done
    datadist.cache_manager.unregister_cache(cache.cache_id)
    datadist.finalize()


def pull(manager, request, cache, careful):
    if not careful:
        manager.pull_cache(CacheKey(prompt_cluster_id=1, req_id=request), cache, batch_index=0)
        return
    deadline = time.monotonic() + RETRY_FOR
    while True:
        try:
            manager.pull_cache(CacheKey(prompt_cluster_id=1, req_id=request), cache,
                               batch_index=0)
            return
        except LLMException as e:
            if e.status_code not in TRANSIENT or time.monotonic() > deadline:
                raise
            logging.info("pull of request %d failed (%s); retrying", request, e.status_code)
            time.sleep(RETRY_PAUSE)


def decoder(datadist, careful):
    manager = datadist.cache_manager
    tensors = [torch.zeros((1, ROW_ELEMS), dtype=torch.int8).npu() for _ in range(2 * LAYERS)]
    cache = manager.register_cache(desc(1), [t.data_ptr() for t in tensors])
    info = LLMClusterInfo()
    info.remote_cluster_id = 1
    info.append_local_ip_info(DECODER_HOST, 0)
    info.append_remote_ip_info(PROMPT_HOST, PORT)
    dist.barrier()  # rows ready, the prompt listens
    ret, _ = datadist.link_clusters([info], timeout=3000)
    if ret != LLMStatusCode.LLM_SUCCESS:
        raise RuntimeError(f"link_clusters failed: {ret}")
    try:
        for request in REQUESTS:
            time.sleep(STEP)
            pull(manager, request, cache, careful)
            for t, tensor in enumerate(tensors):
                if not torch.equal(tensor.cpu()[0], row(request, t)):
                    raise RuntimeError(f"request {request}, tensor {t}: wrong bytes")
        logging.info("pulled and checked %d requests", len(REQUESTS))
    finally:
        if careful:
            dist.barrier()  # done, even after a failure
            datadist.unlink_clusters([info], timeout=3000, force=True)
            manager.unregister_cache(cache.cache_id)
            datadist.finalize()
    if not careful:
        dist.barrier()
        datadist.unlink_clusters([info], timeout=3000)
        manager.unregister_cache(cache.cache_id)
        datadist.finalize()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--role", choices=["prompt", "decoder"], required=True)
    parser.add_argument("--careful", action="store_true")
    args = parser.parse_args()
    rank = 0 if args.role == "prompt" else 1
    torch.npu.set_device(0)
    os.environ.update(MASTER_ADDR=PROMPT_HOST, MASTER_PORT="29650")
    dist.init_process_group("gloo", rank=rank, world_size=2,
                            timeout=datetime.timedelta(seconds=60))
    datadist = LLMDataDist(LLMRole.PROMPT if rank == 0 else LLMRole.DECODER, rank + 1)
    config = LLMConfig()
    config.device_id = 0
    config.enable_cache_manager = True
    if rank == 0:
        config.listen_ip_info = f"{PROMPT_HOST}:{PORT}"
    datadist.init(config.generate_options())
    (prompt(datadist) if rank == 0 else decoder(datadist, args.careful))


if __name__ == "__main__":
    main()
