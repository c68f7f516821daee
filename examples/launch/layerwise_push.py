"""Layer-wise push with transfer_cache_async between two servers, written as programs for the
real library are: two OS processes (run one with --role p, one with --role d), NPU tensors from
torch, torch.distributed barriers, the hosts' addresses on the command line.

    kvsim launch --hosts 10.10.10.1,10.10.10.2 -- \\
        python3 layerwise_push.py --role p --device_id 0 --local_host_ip 10.10.10.1 --remote_host_ip 10.10.10.2 ::: \\
        python3 layerwise_push.py --role d --device_id 0 --local_host_ip 10.10.10.2 --remote_host_ip 10.10.10.1
"""
import argparse
import datetime
import logging
import os

import torch
import torch.distributed as dist
from llm_datadist import (BlocksCacheKey, CacheDesc, DataType, LayerSynchronizer, LLMClusterInfo,
                          LLMConfig, LLMDataDist, LLMRole, LLMStatusCode, Placement,
                          TransferWithCacheKeyConfig)

logging.basicConfig(format="%(asctime)s %(message)s", level=logging.INFO)

LAYERS = 4
BLOCKS = 8
BLOCK_ELEMS = 256
PROMPT, DECODER = 0, 1


def start(role, args):
    os.environ["MASTER_ADDR"] = args.local_host_ip if role == LLMRole.PROMPT else args.remote_host_ip
    os.environ["MASTER_PORT"] = "29500"
    dist.init_process_group("gloo", rank=0 if role == LLMRole.PROMPT else 1, world_size=2,
                            timeout=datetime.timedelta(seconds=30))
    datadist = LLMDataDist(role, PROMPT if role == LLMRole.PROMPT else DECODER)
    config = LLMConfig()
    config.device_id = args.device_id
    config.listen_ip_info = f"{args.local_host_ip}:26000"
    config.enable_cache_manager = True
    config.enable_remote_cache_accessible = True
    datadist.init(config.generate_options())
    return datadist


class EveryLayerReady(LayerSynchronizer):
    """The model has computed every layer already: each layer may go at once."""

    def synchronize_layer(self, layer_index, timeout_in_millis):
        logging.info("layer %d ready", layer_index)
        return True


def prompt(datadist, args):
    manager = datadist.cache_manager
    desc = CacheDesc(2 * LAYERS, [BLOCKS, BLOCK_ELEMS], DataType.DT_FLOAT16, Placement.DEVICE)
    tensors = [torch.full((BLOCKS, BLOCK_ELEMS), t + 1, dtype=torch.float16).npu()
               for t in range(2 * LAYERS)]
    cache = manager.register_blocks_cache(desc, [t.data_ptr() for t in tensors],
                                          BlocksCacheKey(PROMPT, 0))
    dist.barrier()  # both caches registered
    cluster = LLMClusterInfo()
    cluster.remote_cluster_id = DECODER
    cluster.append_local_ip_info(args.local_host_ip, 26000)
    cluster.append_remote_ip_info(args.remote_host_ip, 26000)
    ret, _ = datadist.link_clusters([cluster], 5000)
    if ret != LLMStatusCode.LLM_SUCCESS:
        raise RuntimeError(f"link failed: {ret}")
    config = TransferWithCacheKeyConfig(BlocksCacheKey(DECODER, 0), range(0, LAYERS),
                                        range(0, LAYERS))
    task = manager.transfer_cache_async(cache, EveryLayerReady(), [config],
                                        src_block_indices=[0, 1, 2],
                                        dst_block_indices=[5, 6, 7])
    logging.info("transfer results: %s", task.get_results())
    if task.synchronize() != LLMStatusCode.LLM_SUCCESS:
        raise RuntimeError("transfer failed")
    dist.barrier()  # transfer done
    close(datadist, cache, DECODER)


def decoder(datadist, args):
    manager = datadist.cache_manager
    desc = CacheDesc(2 * LAYERS, [BLOCKS, BLOCK_ELEMS], DataType.DT_FLOAT16, Placement.DEVICE)
    tensors = [torch.zeros(BLOCKS, BLOCK_ELEMS, dtype=torch.float16).npu()
               for _ in range(2 * LAYERS)]
    cache = manager.register_blocks_cache(desc, [t.data_ptr() for t in tensors],
                                          BlocksCacheKey(DECODER, 0))
    dist.barrier()  # both caches registered
    dist.barrier()  # transfer done
    for t, tensor in enumerate(tensors):
        got = tensor.cpu()
        expected = torch.zeros(BLOCKS, BLOCK_ELEMS, dtype=torch.float16)
        expected[5:8] = t + 1
        if not torch.equal(got, expected):
            raise RuntimeError(f"tensor {t}: blocks 5-7 should hold {t + 1}, got {got}")
    logging.info("every layer's K and V landed in blocks 5, 6, 7: %s", tensors[1].cpu()[4:8, :3])
    close(datadist, cache, PROMPT)


def close(datadist, cache, peer):
    """Each side drops its own end of the link (force: no message to the peer), then leaves."""
    cluster = LLMClusterInfo()
    cluster.remote_cluster_id = peer
    ret, _ = datadist.unlink_clusters([cluster], 5000, force=True)
    if ret != LLMStatusCode.LLM_SUCCESS:
        raise RuntimeError("unlink failed")
    dist.barrier()  # both unlinked
    datadist.cache_manager.unregister_cache(cache.cache_id)
    datadist.finalize()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--role", choices=["p", "d"], required=True)
    parser.add_argument("--device_id", type=int, default=0)
    parser.add_argument("--local_host_ip", required=True)
    parser.add_argument("--remote_host_ip", required=True)
    args = parser.parse_args()
    torch.npu.set_device(args.device_id)
    role = LLMRole.PROMPT if args.role == "p" else LLMRole.DECODER
    datadist = start(role, args)
    (prompt if role == LLMRole.PROMPT else decoder)(datadist, args)
    logging.info("done")
