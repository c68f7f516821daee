"""The decoder writes paged-attention blocks into the prompt's blocks cache with push_blocks:
first some blocks of every layer (scattered, with one run of consecutive blocks), then one block
of a single layer into another layer of the prompt. Both sides enable the cache manager and
remote-accessible caches explicitly, and both unlink with force=True at the end. The prompt
checks every block, pushed or not, byte for byte.

    kvsim launch --hosts 10.10.10.1,10.10.10.2 -- \\
        python3 push_blocks.py --role p --device_id 0 --local_host_ip 10.10.10.1 --remote_host_ip 10.10.10.2 ::: \\
        python3 push_blocks.py --role d --device_id 0 --local_host_ip 10.10.10.2 --remote_host_ip 10.10.10.1
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

LAYERS = 2
BLOCKS = 6
BLOCK_ELEMS = 48       # float16 elements per block
PROMPT_ID, DECODER_ID = 31, 32
PROMPT_PORT, DECODER_PORT = 26010, 26020

# Every layer: decoder block -> prompt block (0->5, then the run 1,2 -> 3,4; 4->0).
ALL_LAYERS = ([0, 1, 2, 4], [5, 3, 4, 0])
# Then layer 1's block 5 of the decoder goes to layer 0's block 1 of the prompt.
ONE_LAYER = ([5], [1], range(1, 2), range(0, 1))


def decoder_block(tensor, block):
    """Block `block` of decoder tensor `tensor`: integers below 2048, so exact in float16,
    different for every element of the cache."""
    first = (tensor * BLOCKS + block) * BLOCK_ELEMS
    return (first + torch.arange(BLOCK_ELEMS)).to(torch.float16)


def prompt_block(tensor, block):
    """What the prompt's blocks hold before the push: negative, so never a decoder value."""
    return torch.full((BLOCK_ELEMS,), -1 - tensor * BLOCKS - block, dtype=torch.float16)


def build(fill):
    return [torch.stack([fill(t, b) for b in range(BLOCKS)]) for t in range(2 * LAYERS)]


def expected_prompt():
    tensors = build(prompt_block)
    for tensor in range(2 * LAYERS):
        for src, dst in zip(*ALL_LAYERS):
            tensors[tensor][dst] = decoder_block(tensor, src)
    src_blocks, dst_blocks, src_layers, dst_layers = ONE_LAYER
    for src_layer, dst_layer in zip(src_layers, dst_layers):
        for kv in (0, 1):
            for src, dst in zip(src_blocks, dst_blocks):
                tensors[2 * dst_layer + kv][dst] = decoder_block(2 * src_layer + kv, src)
    return tensors


def setup(is_prompt, args):
    lower = min(args.local_host_ip, args.remote_host_ip, key=ipaddress.IPv4Address)
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = lower, "29620"
    dist.init_process_group(backend="gloo", rank=0 if is_prompt else 1, world_size=2,
                            timeout=datetime.timedelta(seconds=20))
    logging.info("process group ready (rank %d)", dist.get_rank())
    datadist = LLMDataDist(LLMRole.PROMPT if is_prompt else LLMRole.DECODER,
                           PROMPT_ID if is_prompt else DECODER_ID)
    config = LLMConfig()
    config.device_id = args.device_id
    config.enable_cache_manager = True
    config.enable_remote_cache_accessible = True
    config.listen_ip_info = f"{args.local_host_ip}:{PROMPT_PORT if is_prompt else DECODER_PORT}"
    datadist.init(config.generate_options())
    return datadist


def register(datadist, tensors, cluster_id):
    desc = CacheDesc(2 * LAYERS, [BLOCKS, BLOCK_ELEMS], DataType.DT_FLOAT16, Placement.DEVICE)
    return datadist.cache_manager.register_blocks_cache(desc, [t.data_ptr() for t in tensors],
                                                        BlocksCacheKey(cluster_id, 0))


def force_unlink(datadist, remote_id):
    cluster = LLMClusterInfo()
    cluster.remote_cluster_id = remote_id
    ret, per_cluster = datadist.unlink_clusters([cluster], 5000, force=True)
    if ret != LLMStatusCode.LLM_SUCCESS:
        raise RuntimeError(f"unlink_clusters(force=True): {ret} {per_cluster}")
    logging.info("unlinked from cluster %d (force)", remote_id)


def prompt_side(datadist):
    tensors = [t.npu() for t in build(prompt_block)]
    cache = register(datadist, tensors, PROMPT_ID)
    logging.info("prompt blocks cache registered")
    dist.barrier()  # registered
    dist.barrier()  # pushed

    mismatches = []
    for index, (tensor, want) in enumerate(zip(tensors, expected_prompt())):
        got = tensor.cpu()
        for block in range(BLOCKS):
            if not torch.equal(got[block].view(torch.int16), want[block].view(torch.int16)):
                mismatches.append((index, block, got[block][:4].tolist()))
    if mismatches:
        raise RuntimeError(f"blocks differ (tensor, block, first values): {mismatches}")
    logging.info("prompt verified all %d blocks of %d tensors after push_blocks",
                 BLOCKS, len(tensors))
    force_unlink(datadist, DECODER_ID)
    dist.barrier()  # both unlinked
    datadist.cache_manager.unregister_cache(cache.cache_id)
    datadist.finalize()


def decoder_side(datadist, args):
    tensors = [t.npu() for t in build(decoder_block)]
    cache = register(datadist, tensors, DECODER_ID)
    dist.barrier()  # registered

    cluster = LLMClusterInfo()
    cluster.remote_cluster_id = PROMPT_ID
    cluster.append_local_ip_info(args.local_host_ip, DECODER_PORT)
    cluster.append_remote_ip_info(args.remote_host_ip, PROMPT_PORT)
    ret, per_cluster = datadist.link_clusters([cluster], 5000)
    if ret != LLMStatusCode.LLM_SUCCESS:
        raise RuntimeError(f"link_clusters: {ret} {per_cluster}")

    manager, key = datadist.cache_manager, BlocksCacheKey(PROMPT_ID, 0)
    manager.push_blocks(key, cache, src_blocks=ALL_LAYERS[0], dst_blocks=ALL_LAYERS[1])
    src_blocks, dst_blocks, src_layers, dst_layers = ONE_LAYER
    manager.push_blocks(key, cache, src_blocks=src_blocks, dst_blocks=dst_blocks,
                        src_layer_range=src_layers, dst_layer_range=dst_layers)
    logging.info("decoder pushed blocks %s -> %s and %s -> %s", *ALL_LAYERS, src_blocks,
                 dst_blocks)
    dist.barrier()  # pushed
    force_unlink(datadist, PROMPT_ID)
    dist.barrier()  # both unlinked
    manager.unregister_cache(cache.cache_id)
    datadist.finalize()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--role", choices=["p", "d"], required=True)
    parser.add_argument("--device_id", type=int, default=0)
    parser.add_argument("--local_host_ip", required=True)
    parser.add_argument("--remote_host_ip", required=True)
    cli = parser.parse_args()
    torch.npu.set_device(cli.device_id)
    dd = setup(cli.role == "p", cli)
    if cli.role == "p":
        prompt_side(dd)
    else:
        decoder_side(dd, cli)
    logging.info("push_blocks sample done")
