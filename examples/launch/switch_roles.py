"""Two clusters trade roles. First A is the prompt (listening) and B the decoder: B links to A,
pulls blocks with pull_blocks and unlinks. Then both call switch_role: A becomes a decoder (and
stops listening), B a prompt listening on its own address. A links to B, and B pushes blocks
back with push_blocks, moving tensors one by one (tensor_num_per_layer=1) with a shift, so that
B's tensor i lands in A's tensor i-1. B checks what it pulled; A checks what came back. Both
unlink with force at the end.

    kvsim launch --hosts 10.60.0.1,10.60.0.2 -- \\
        python3 switch_roles.py --role p --device_id 1 --local_host_ip 10.60.0.1 --remote_host_ip 10.60.0.2 ::: \\
        python3 switch_roles.py --role d --device_id 1 --local_host_ip 10.60.0.2 --remote_host_ip 10.60.0.1
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

A_ID, B_ID = 5, 6
A_PORT, B_PORT = 26500, 26600
TENSORS = 4                       # two layers, K and V
BLOCKS = 6
BLOCK_ELEMS = 40                  # float32
PULL = ([0, 2, 4], [1, 3, 5])     # phase 1: A's blocks -> B's blocks (every tensor)
PUSH = ([1, 0], [5, 1])           # phase 2: B's blocks -> A's blocks
PUSH_TENSORS = (range(1, 4), range(0, 3))   # B's tensors 1-3 -> A's tensors 0-2


def original(cluster_id, tensor, block):
    """A block as its owner made it: distinct per cluster, tensor, block and element."""
    return (cluster_id * 10000 + tensor * 1000 + block * 100 + torch.arange(BLOCK_ELEMS)).float()


def make_cache(cluster_id):
    return [torch.stack([original(cluster_id, t, b) for b in range(BLOCKS)])
            for t in range(TENSORS)]


def b_after_pull():
    tensors = make_cache(B_ID)
    for t in range(TENSORS):
        for src, dst in zip(*PULL):
            tensors[t][dst] = original(A_ID, t, src)
    return tensors


def a_after_push():
    tensors, b = make_cache(A_ID), b_after_pull()
    for src_t, dst_t in zip(*PUSH_TENSORS):
        for src, dst in zip(*PUSH):
            tensors[dst_t][dst] = b[src_t][src]
    return tensors


def verify(who, tensors, expected):
    for t, (tensor, want) in enumerate(zip(tensors, expected)):
        got = tensor.cpu()
        if not torch.equal(got.view(torch.int32), want.view(torch.int32)):
            blocks = [b for b in range(BLOCKS) if not torch.equal(got[b], want[b])]
            raise RuntimeError(f"{who}: tensor {t} blocks {blocks} differ, e.g. "
                               f"{got[blocks[0]][:3].tolist()} != {want[blocks[0]][:3].tolist()}")
    logging.info("%s: all %d blocks of %d tensors verified", who, BLOCKS, len(tensors))


def cluster_info(remote_id, local_ip=None, remote_ip=None, remote_port=None):
    info = LLMClusterInfo()
    info.remote_cluster_id = remote_id
    if local_ip is not None:
        info.append_local_ip_info(local_ip, 0)
    if remote_ip is not None:
        info.append_remote_ip_info(remote_ip, remote_port)
    return info


def checked(what, result):
    ret, per_cluster = result
    if ret != LLMStatusCode.LLM_SUCCESS:
        raise RuntimeError(f"{what}: {ret} {per_cluster}")
    logging.info("%s: ok", what)


def register(datadist, tensors, cluster_id):
    desc = CacheDesc(TENSORS, [BLOCKS, BLOCK_ELEMS], DataType.DT_FLOAT, Placement.DEVICE)
    return datadist.cache_manager.register_blocks_cache(desc, [t.data_ptr() for t in tensors],
                                                        BlocksCacheKey(cluster_id, 0))


def cluster_a(datadist, args):
    """Starts as the prompt."""
    tensors = [t.npu() for t in make_cache(A_ID)]
    cache = register(datadist, tensors, A_ID)
    dist.barrier()  # 1: registered
    dist.barrier()  # 2: B pulled and unlinked
    datadist.switch_role(LLMRole.DECODER)
    logging.info("A is now a decoder")
    dist.barrier()  # 3: A switched
    dist.barrier()  # 4: B switched and listens
    checked("A links to B", datadist.link_clusters(
        [cluster_info(B_ID, args.local_host_ip, args.remote_host_ip, B_PORT)], 5000))
    dist.barrier()  # 5: linked
    dist.barrier()  # 6: B pushed
    verify("A after B's push", tensors, a_after_push())
    checked("A unlinks (force)", datadist.unlink_clusters([cluster_info(B_ID)], 5000, force=True))
    dist.barrier()  # 7: unlinked
    datadist.cache_manager.unregister_cache(cache.cache_id)
    datadist.finalize()


def cluster_b(datadist, args):
    """Starts as the decoder."""
    manager = datadist.cache_manager
    tensors = [t.npu() for t in make_cache(B_ID)]
    cache = register(datadist, tensors, B_ID)
    dist.barrier()  # 1: registered
    checked("B links to A", datadist.link_clusters(
        [cluster_info(A_ID, args.local_host_ip, args.remote_host_ip, A_PORT)], 5000))
    manager.pull_blocks(BlocksCacheKey(A_ID, 0), cache, src_blocks=PULL[0], dst_blocks=PULL[1])
    verify("B after pulling from A", tensors, b_after_pull())
    checked("B unlinks", datadist.unlink_clusters(
        [cluster_info(A_ID, remote_ip=args.remote_host_ip, remote_port=A_PORT)], 5000))
    dist.barrier()  # 2: B pulled and unlinked
    dist.barrier()  # 3: A switched
    options = LLMConfig()
    options.listen_ip_info = f"{args.local_host_ip}:{B_PORT}"
    datadist.switch_role(LLMRole.PROMPT, options.generate_options())
    logging.info("B is now a prompt listening on %s", options.listen_ip_info)
    dist.barrier()  # 4: B switched and listens
    dist.barrier()  # 5: linked
    manager.push_blocks(BlocksCacheKey(A_ID, 0), cache, src_blocks=PUSH[0], dst_blocks=PUSH[1],
                        src_layer_range=PUSH_TENSORS[0], dst_layer_range=PUSH_TENSORS[1],
                        tensor_num_per_layer=1)
    logging.info("B pushed blocks %s to A's %s, tensors %s -> %s", *PUSH,
                 list(PUSH_TENSORS[0]), list(PUSH_TENSORS[1]))
    dist.barrier()  # 6: B pushed
    checked("B unlinks (force)", datadist.unlink_clusters([cluster_info(A_ID)], 5000, force=True))
    dist.barrier()  # 7: unlinked
    manager.unregister_cache(cache.cache_id)
    datadist.finalize()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--role", choices=["p", "d"], required=True,
                        help="the role at start: p is cluster A, d is cluster B")
    parser.add_argument("--device_id", type=int, default=0)
    parser.add_argument("--local_host_ip", required=True)
    parser.add_argument("--remote_host_ip", required=True)
    args = parser.parse_args()
    torch.npu.set_device(args.device_id)
    is_a = args.role == "p"
    os.environ["MASTER_ADDR"] = str(min(map(ipaddress.IPv4Address,
                                            (args.local_host_ip, args.remote_host_ip))))
    os.environ["MASTER_PORT"] = "29670"
    dist.init_process_group("gloo", rank=0 if is_a else 1, world_size=2,
                            timeout=datetime.timedelta(seconds=20))
    datadist = LLMDataDist(LLMRole.PROMPT if is_a else LLMRole.DECODER, A_ID if is_a else B_ID)
    config = LLMConfig()
    config.device_id = args.device_id
    config.enable_cache_manager = True
    config.enable_remote_cache_accessible = True
    config.enable_switch_role = True
    if is_a:
        config.listen_ip_info = f"{args.local_host_ip}:{A_PORT}"
    datadist.init(config.generate_options())
    (cluster_a if is_a else cluster_b)(datadist, args)
    logging.info("cluster %s done", "A" if is_a else "B")


if __name__ == "__main__":
    main()
