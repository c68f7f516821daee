"""xPyD: several prompt servers and one decoder. Every cluster's id is derived from its
"ip:port"; prompts listen there. The processes have no process group: they keep step by
sleeping (the decoder gives the prompts time to register, the prompts stay up long enough for
the decoder to finish). The decoder links to every prompt with one link_clusters call, pulls
blocks from each prompt into its own region of its blocks cache, and checks every block.

    kvsim launch --hosts 10.50.0.1,10.50.0.2,10.50.0.3,10.50.0.9 -- \\
        python3 xpyd_pull_blocks.py --role p --device_id 0 --local_ip_port 10.50.0.1:26100 ::: \\
        python3 xpyd_pull_blocks.py --role p --device_id 2 --local_ip_port 10.50.0.2:26100 ::: \\
        python3 xpyd_pull_blocks.py --role p --device_id 4 --local_ip_port 10.50.0.3:26200 ::: \\
        python3 xpyd_pull_blocks.py --role d --device_id 0 --local_ip_port 10.50.0.9:26300 \\
            --remote_ip_port "10.50.0.1:26100;10.50.0.2:26100;10.50.0.3:26200"
"""
import argparse
import ipaddress
import logging
import time

import torch
from llm_datadist import (BlocksCacheKey, CacheDesc, DataType, LLMClusterInfo, LLMConfig,
                          LLMDataDist, LLMRole, LLMStatusCode, Placement)

logging.basicConfig(format="%(asctime)s %(message)s", level=logging.INFO)

TENSORS = 2                 # one layer: K and V
PROMPT_BLOCKS = 4
BLOCK_ELEMS = 64            # int32
TAKE = ([3, 1], 2)          # from every prompt: its blocks 3 and 1, into 2 decoder blocks
PROMPT_LIFETIME_S = 120     # how long a prompt serves before it leaves
DECODER_START_DELAY_S = 10  # how long the decoder lets the prompts register


def cluster_id_of(ip_port):
    """A cluster id from "ip:port": the IPv4 address in the high bits, the port in the low 16."""
    ip, port = ip_port.rsplit(":", 1)
    if not 0 < int(port) < 65536:
        raise ValueError(f"bad port in {ip_port!r}")
    return int(ipaddress.IPv4Address(ip)) << 16 | int(port)


def block_contents(cluster_id, tensor, block):
    """A prompt's block: a 20-bit digest of the cluster id, then tensor, block and element."""
    tag = (cluster_id ^ (cluster_id >> 20) ^ (cluster_id >> 40)) & 0xFFFFF
    first = ((tag * TENSORS + tensor) * PROMPT_BLOCKS + block) * BLOCK_ELEMS
    return first + torch.arange(BLOCK_ELEMS, dtype=torch.int32)


def blocks_desc(blocks):
    return CacheDesc(TENSORS, [blocks, BLOCK_ELEMS], DataType.DT_INT32, Placement.DEVICE)


def open_datadist(role, args):
    cluster_id = cluster_id_of(args.local_ip_port)
    datadist = LLMDataDist(role, cluster_id)
    config = LLMConfig()
    config.device_id = args.device_id
    config.enable_cache_manager = True
    if role == LLMRole.PROMPT:
        config.listen_ip_info = args.local_ip_port
    datadist.init(config.generate_options())
    logging.info("%s cluster %d (%s) up on device %d", role.name.lower(), cluster_id,
                 args.local_ip_port, args.device_id)
    return datadist, cluster_id


def serve_prompt(args):
    datadist, me = open_datadist(LLMRole.PROMPT, args)
    tensors = [torch.stack([block_contents(me, t, b) for b in range(PROMPT_BLOCKS)]).npu()
               for t in range(TENSORS)]
    cache = datadist.cache_manager.register_blocks_cache(
        blocks_desc(PROMPT_BLOCKS), [t.data_ptr() for t in tensors], BlocksCacheKey(me, 0))
    logging.info("prompt %d: blocks registered, serving for %d s", me, PROMPT_LIFETIME_S)
    time.sleep(PROMPT_LIFETIME_S)
    datadist.cache_manager.unregister_cache(cache.cache_id)
    datadist.finalize()


def run_decoder(args):
    prompts = [p for p in args.remote_ip_port.split(";") if p]
    datadist, me = open_datadist(LLMRole.DECODER, args)
    src_blocks, per_prompt = TAKE
    total = per_prompt * len(prompts) + 1       # one spare block nobody writes
    filler = torch.full((total, BLOCK_ELEMS), -1, dtype=torch.int32)
    tensors = [filler.clone().npu() for _ in range(TENSORS)]
    cache = datadist.cache_manager.register_blocks_cache(
        blocks_desc(total), [t.data_ptr() for t in tensors], BlocksCacheKey(me, 0))
    time.sleep(DECODER_START_DELAY_S)

    clusters = []
    for ip_port in prompts:
        info = LLMClusterInfo()
        info.remote_cluster_id = cluster_id_of(ip_port)
        info.append_local_ip_info(args.local_ip_port.split(":")[0], 0)
        ip, port = ip_port.split(":")
        info.append_remote_ip_info(ip, int(port))
        clusters.append(info)
    ret, per_cluster = datadist.link_clusters(clusters, 10000)
    if ret != LLMStatusCode.LLM_SUCCESS:
        raise RuntimeError(f"link_clusters to {prompts}: {ret} {per_cluster}")
    logging.info("linked to %d prompts in one call", len(prompts))

    expected = [filler.clone() for _ in range(TENSORS)]
    for i, ip_port in enumerate(prompts):
        remote = cluster_id_of(ip_port)
        dst_blocks = [per_prompt * i + j for j in range(per_prompt)]
        datadist.cache_manager.pull_blocks(BlocksCacheKey(remote, 0), cache,
                                           src_blocks=src_blocks, dst_blocks=dst_blocks)
        logging.info("pulled blocks %s of %s into %s", src_blocks, ip_port, dst_blocks)
        for t in range(TENSORS):
            for src, dst in zip(src_blocks, dst_blocks):
                expected[t][dst] = block_contents(remote, t, src)

    for t, tensor in enumerate(tensors):
        got = tensor.cpu()
        for block in range(total):
            if not torch.equal(got[block], expected[t][block]):
                raise RuntimeError(f"tensor {t} block {block}: {got[block][:5].tolist()}... "
                                   f"expected {expected[t][block][:5].tolist()}...")
    logging.info("decoder verified %d blocks from %d prompts", per_prompt * len(prompts),
                 len(prompts))

    ret, per_cluster = datadist.unlink_clusters(clusters, 10000)
    if ret != LLMStatusCode.LLM_SUCCESS:
        raise RuntimeError(f"unlink_clusters: {ret} {per_cluster}")
    datadist.cache_manager.unregister_cache(cache.cache_id)
    datadist.finalize()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--role", choices=("p", "d"), required=True)
    parser.add_argument("--device_id", type=int, default=0)
    parser.add_argument("--local_ip_port", required=True, help="e.g. 10.50.0.1:26100")
    parser.add_argument("--remote_ip_port", help="the prompts, ';'-separated (decoder only)")
    cli = parser.parse_args()
    if cli.role == "d" and not cli.remote_ip_port:
        parser.error("the decoder needs --remote_ip_port")
    torch.npu.set_device(cli.device_id)
    if cli.role == "p":
        serve_prompt(cli)
    else:
        run_decoder(cli)
    logging.info("%s done", cli.local_ip_port)
