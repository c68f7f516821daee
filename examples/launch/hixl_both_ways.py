"""The hixl transfer backend (llm.TransferBackend = "hixl"): both clusters listen, and each
links to the other at the same time, so there is one link in each direction. Then one request's
KV cache moves to the decoder over both links at once, split by layer: the decoder pulls layer 0
with pull_blocks over its link while the prompt pushes layer 1 with push_blocks over its own.
The decoder checks every block of every tensor afterwards; the prompt checks that its own cache
was not written.

    kvsim launch --hosts 10.70.0.1,10.70.0.2 -- \\
        python3 hixl_both_ways.py --role p --device_id 2 --local_host_ip 10.70.0.1 --remote_host_ip 10.70.0.2 ::: \\
        python3 hixl_both_ways.py --role d --device_id 5 --local_host_ip 10.70.0.2 --remote_host_ip 10.70.0.1
"""
import argparse
import datetime
import ipaddress
import logging
import os

import torch
import torch.distributed as dist
from llm_datadist import (BlocksCacheKey, CacheDesc, DataType, LLMClusterInfo, LLMConfig,
                          LLMDataDist, LLMRole, LLMStatusCode, Placement)

logging.basicConfig(format="%(asctime)s %(message)s", level=logging.INFO)

IDS = {"p": 41, "d": 42}
PORTS = {"p": 26700, "d": 26800}
LAYERS = 2
BLOCKS = 8
BLOCK_ELEMS = 128                       # bfloat16, handled as int16 bit patterns
REQUEST_BLOCKS = ([2, 3, 4, 7], [0, 1, 5, 6])   # prompt blocks -> decoder blocks
PULLED_LAYERS = range(0, 1)             # the decoder pulls these
PUSHED_LAYERS = range(1, 2)             # the prompt pushes these


def bits(side, tensor):
    """A tensor's bfloat16 bit patterns: finite values, different per side, tensor, block and
    element."""
    base = {"p": 0x1000, "d": 0x2000}[side] + tensor * 0x400
    blocks = torch.arange(BLOCKS, dtype=torch.int32).unsqueeze(1) * BLOCK_ELEMS
    return (base + blocks + torch.arange(BLOCK_ELEMS, dtype=torch.int32)).to(torch.int16)


def start(side, args):
    master = min(args.local_host_ip, args.remote_host_ip, key=ipaddress.ip_address)
    os.environ.update(MASTER_ADDR=master, MASTER_PORT="29680")
    dist.init_process_group("gloo", rank=0 if side == "p" else 1, world_size=2,
                            timeout=datetime.timedelta(seconds=20))
    datadist = LLMDataDist(LLMRole.PROMPT if side == "p" else LLMRole.DECODER, IDS[side])
    config = LLMConfig()
    config.device_id = args.device_id
    config.enable_cache_manager = True
    config.transfer_backend = "hixl"
    config.listen_ip_info = f"{args.local_host_ip}:{PORTS[side]}"
    datadist.init(config.generate_options())
    logging.info("cluster %d (hixl backend) listening on %s", IDS[side], config.listen_ip_info)
    tensors = [bits(side, t).view(torch.bfloat16).npu() for t in range(2 * LAYERS)]
    desc = CacheDesc(2 * LAYERS, [BLOCKS, BLOCK_ELEMS], DataType.DT_BF16, Placement.DEVICE)
    cache = datadist.cache_manager.register_blocks_cache(
        desc, [t.data_ptr() for t in tensors], BlocksCacheKey(IDS[side], 0))
    return datadist, tensors, cache


def link_to_peer(datadist, side, args):
    peer = "d" if side == "p" else "p"
    info = LLMClusterInfo()
    info.remote_cluster_id = IDS[peer]
    info.append_local_ip_info(args.local_host_ip, PORTS[side])
    info.append_remote_ip_info(args.remote_host_ip, PORTS[peer])
    ret, codes = datadist.link_clusters([info], 5000)
    if ret != LLMStatusCode.LLM_SUCCESS:
        raise RuntimeError(f"link to cluster {IDS[peer]}: {ret} {codes}")
    logging.info("linked to cluster %d", IDS[peer])
    return info


def expected_decoder():
    want = [bits("d", t) for t in range(2 * LAYERS)]
    for layer in list(PULLED_LAYERS) + list(PUSHED_LAYERS):
        for kv in (0, 1):
            t = 2 * layer + kv
            for src, dst in zip(*REQUEST_BLOCKS):
                want[t][dst] = bits("p", t)[src]
    return want


def compare(who, tensors, want):
    for t, (tensor, expected) in enumerate(zip(tensors, want)):
        got = tensor.cpu().view(torch.int16)
        wrong = (got != expected).any(dim=1).nonzero().flatten().tolist()
        if wrong:
            raise RuntimeError(f"{who}: tensor {t} has wrong blocks {wrong}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--role", choices=("p", "d"), required=True)
    parser.add_argument("--device_id", type=int, default=0)
    parser.add_argument("--local_host_ip", required=True)
    parser.add_argument("--remote_host_ip", required=True)
    args = parser.parse_args()
    side = args.role
    torch.npu.set_device(args.device_id)
    datadist, tensors, cache = start(side, args)
    manager = datadist.cache_manager

    dist.barrier()  # both registered and listening
    info = link_to_peer(datadist, side, args)   # both sides at once
    dist.barrier()  # both links up
    src_blocks, dst_blocks = REQUEST_BLOCKS
    if side == "d":
        manager.pull_blocks(BlocksCacheKey(IDS["p"], 0), cache, src_blocks=src_blocks,
                            dst_blocks=dst_blocks, src_layer_range=PULLED_LAYERS,
                            dst_layer_range=PULLED_LAYERS)
        logging.info("decoder pulled layer(s) %s", list(PULLED_LAYERS))
    else:
        manager.push_blocks(BlocksCacheKey(IDS["d"], 0), cache, src_blocks=src_blocks,
                            dst_blocks=dst_blocks, src_layer_range=PUSHED_LAYERS,
                            dst_layer_range=PUSHED_LAYERS)
        logging.info("prompt pushed layer(s) %s", list(PUSHED_LAYERS))
    dist.barrier()  # both transfers done

    if side == "d":
        compare("decoder", tensors, expected_decoder())
        logging.info("decoder verified blocks %s of all %d layers (pulled and pushed)",
                     dst_blocks, LAYERS)
    else:
        compare("prompt", tensors, [bits("p", t) for t in range(2 * LAYERS)])
        logging.info("prompt verified its own cache is unchanged")

    ret, codes = datadist.unlink_clusters([info], 5000)
    if ret != LLMStatusCode.LLM_SUCCESS:
        raise RuntimeError(f"unlink: {ret} {codes}")
    dist.barrier()  # both unlinked
    manager.unregister_cache(cache.cache_id)
    datadist.finalize()
    logging.info("cluster %d finished", IDS[side])


if __name__ == "__main__":
    main()
