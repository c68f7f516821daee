"""A decoder pulls 20 requests' KV rows from a prompt over link_clusters, one request per decode
step, as a serving engine does; the prompt waits until the decoder is done. Written twice over:

- careless (the default): every call is assumed to succeed. A link fault during a pull raises
  LLMException out of the decoder, which dies without telling the prompt, and the prompt waits
  at its barrier until the group's timeout. If either process dies, the other does too.
- careful (--careful): a pull that fails with a transient status (the link went down, a
  timeout) is retried after a pause, up to a deadline, on a link made again: the library leaves
  a link whose transfer failed unusable until it is unlinked and linked again (LLMStatusCode's
  LLM_TIMEOUT row), so a retry on the old link fails at once. Past the deadline the prompt counts
  as lost and the
  requests not pulled are left to be recomputed, as a serving engine falls back to prefill;
  every pulled row is checked; barriers give up after a bound; both sides always clean up
  (unlink, unregister, finalize).

Run either under seeded faults (the launch files hold the hosts and the fault plan):

    kvsim launch -f careless.yaml --faults 1-8         # link outages and slow links
    kvsim launch -f careful.yaml --faults 1-8
    kvsim launch -f careless_kills.yaml --faults 1-8   # the prompt or the decoder killed
    kvsim launch -f careful_kills.yaml --faults 1-8
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
RELINK_TIMEOUT_MS = 20           # a link attempt while the path is still down waits this long
PEER_WAIT = datetime.timedelta(seconds=30)  # how long a careful side waits for the other


def row(request, tensor):
    return ((torch.arange(ROW_ELEMS, dtype=torch.int32) * 3 + request * 7 + tensor) % 251
            ).to(torch.int8)


def desc(rows):
    return CacheDesc(2 * LAYERS, [rows, ROW_ELEMS], DataType.DT_INT8, Placement.DEVICE)


def meet(careful, what):
    """A barrier with the other process; a careful side gives up after PEER_WAIT (False)."""
    if not careful:
        dist.barrier()
        return True
    try:
        dist.monitored_barrier(timeout=PEER_WAIT)
        return True
    except RuntimeError as e:
        logging.info("the other side never reached '%s' (%s)", what, e)
        return False


def prompt(datadist, careful):
    tensors = [torch.stack([row(r, t) for r in REQUESTS]).npu() for t in range(2 * LAYERS)]
    keys = [CacheKey(prompt_cluster_id=1, req_id=r) for r in REQUESTS]
    cache = datadist.cache_manager.register_cache(desc(len(REQUESTS)),
                                                  [t.data_ptr() for t in tensors], keys)
    try:
        if meet(careful, "rows ready"):
            meet(careful, "decoder done")
    finally:
        if careful:
            datadist.cache_manager.unregister_cache(cache.cache_id)
            datadist.finalize()
    if not careful:
        datadist.cache_manager.unregister_cache(cache.cache_id)
        datadist.finalize()


def relink(datadist, info):
    """Unlinks the prompt (force: this side only) and links it again; the link's status."""
    datadist.unlink_clusters([info], timeout=3000, force=True)
    ret, _ = datadist.link_clusters([info], timeout=RELINK_TIMEOUT_MS)
    return ret


def pull(datadist, info, request, cache, careful):
    """Pulls one request's rows; False when a careful decoder gives the prompt up for lost."""
    manager = datadist.cache_manager
    if not careful:
        manager.pull_cache(CacheKey(prompt_cluster_id=1, req_id=request), cache, batch_index=0)
        return True
    deadline = time.monotonic() + RETRY_FOR
    while True:
        try:
            manager.pull_cache(CacheKey(prompt_cluster_id=1, req_id=request), cache,
                               batch_index=0)
            return True
        except LLMException as e:
            if e.status_code not in TRANSIENT:
                raise
            logging.info("pull of request %d failed (%s); relinking", request, e.status_code)
        while True:
            if time.monotonic() > deadline:
                logging.info("pull of request %d still fails after %.1f s: the prompt is lost",
                             request, RETRY_FOR)
                return False
            time.sleep(RETRY_PAUSE)
            ret = relink(datadist, info)
            if ret == LLMStatusCode.LLM_SUCCESS:
                break
            logging.info("relink failed (%s); trying again", ret)


def decoder(datadist, careful):
    manager = datadist.cache_manager
    tensors = [torch.zeros((1, ROW_ELEMS), dtype=torch.int8).npu() for _ in range(2 * LAYERS)]
    cache = manager.register_cache(desc(1), [t.data_ptr() for t in tensors])
    info = LLMClusterInfo()
    info.remote_cluster_id = 1
    info.append_local_ip_info(DECODER_HOST, 0)
    info.append_remote_ip_info(PROMPT_HOST, PORT)
    pulled = 0
    try:
        if not meet(careful, "rows ready"):  # the prompt listens once it is there
            return
        ret, _ = datadist.link_clusters([info], timeout=3000)
        if ret != LLMStatusCode.LLM_SUCCESS:
            if careful:
                logging.info("link_clusters failed (%s): the prompt is lost", ret)
                return
            raise RuntimeError(f"link_clusters failed: {ret}")
        for request in REQUESTS:
            time.sleep(STEP)
            if not pull(datadist, info, request, cache, careful):
                break
            for t, tensor in enumerate(tensors):
                if not torch.equal(tensor.cpu()[0], row(request, t)):
                    raise RuntimeError(f"request {request}, tensor {t}: wrong bytes")
            pulled += 1
        logging.info("pulled and checked %d requests", pulled)
    finally:
        if careful:
            if pulled < len(REQUESTS):
                logging.info("%d requests left to recompute", len(REQUESTS) - pulled)
            meet(careful, "decoder done")  # done, even after a failure
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
    (prompt(datadist, args.careful) if rank == 0 else decoder(datadist, args.careful))


if __name__ == "__main__":
    main()
