"""The decoder writes rows of its contiguous KV cache into the prompt's cache with push_cache,
addressing the prompt's cache by CacheKeyByIdAndIndex (cluster, cache id, row). Both sides run
in "LocalCommRes" mode (llm.LocalCommRes = ""), which turns on the cache manager and remote
access. The prompt tells the decoder its cache id over torch.distributed; the prompt then checks
every byte it received, and that the rows nobody pushed to kept their old contents.

    kvsim launch --hosts 10.10.10.1,10.10.10.2 -- \\
        python3 push_cache.py --role p --device_id 0 --local_host_ip 10.10.10.1 --remote_host_ip 10.10.10.2 ::: \\
        python3 push_cache.py --role d --device_id 0 --local_host_ip 10.10.10.2 --remote_host_ip 10.10.10.1
"""
import argparse
import datetime
import ipaddress
import logging
import os

import torch
import torch.distributed as dist
from llm_datadist import (CacheDesc, CacheKeyByIdAndIndex, DataType, LLMClusterInfo, LLMConfig,
                          LLMDataDist, LLMRole, LLMStatusCode, Placement)

logging.basicConfig(format="%(asctime)s %(message)s", level=logging.INFO)

N_LAYERS = 3           # K and V per layer: 6 tensors
ROWS = 4               # batch rows per tensor
ROW_LEN = 24           # int32 elements per row
UNTOUCHED = -7         # what the prompt's rows hold before anything arrives
CLUSTER = {"p": 100, "d": 200}
PORT = {"p": 27100, "d": 27200}

# (decoder row, prompt row, decoder layers, prompt layers) of each push_cache call
PUSHES = [
    (1, 2, range(0, N_LAYERS), range(0, N_LAYERS)),  # one whole row, every layer
    (3, 0, range(1, 3), range(0, 2)),                # one row, decoder layers 1-2 -> prompt 0-1
]


def decoder_value(tensor, row, column):
    """What the decoder's tensor `tensor` holds at [row, column]: unique in the whole cache."""
    return 10000 * (tensor + 1) + 100 * row + column


def decoder_tensor(tensor):
    rows = torch.arange(ROWS, dtype=torch.int32).unsqueeze(1)
    columns = torch.arange(ROW_LEN, dtype=torch.int32).unsqueeze(0)
    return decoder_value(tensor, rows, columns)


def expected_prompt_tensors():
    expected = [torch.full((ROWS, ROW_LEN), UNTOUCHED, dtype=torch.int32)
                for _ in range(2 * N_LAYERS)]
    for src_row, dst_row, src_layers, dst_layers in PUSHES:
        for src_layer, dst_layer in zip(src_layers, dst_layers):
            for kv in (0, 1):
                src = 2 * src_layer + kv
                expected[2 * dst_layer + kv][dst_row] = decoder_tensor(src)[src_row]
    return expected


def join_group(role, args):
    """Rank 0 is the prompt; the rendezvous lives on the lower of the two host addresses."""
    lower = min(args.local_host_ip, args.remote_host_ip, key=ipaddress.IPv4Address)
    os.environ["MASTER_ADDR"] = lower
    os.environ["MASTER_PORT"] = "29610"
    rank = 0 if role == "p" else 1
    logging.info("joining the process group as rank %d, rendezvous at %s", rank, lower)
    dist.init_process_group("gloo", rank=rank, world_size=2,
                            timeout=datetime.timedelta(seconds=20))


def open_datadist(role, args):
    datadist = LLMDataDist(LLMRole.PROMPT if role == "p" else LLMRole.DECODER, CLUSTER[role])
    config = LLMConfig()
    config.device_id = args.device_id
    config.local_comm_res = ""   # "LocalCommRes" mode: cache manager and remote access on
    config.listen_ip_info = f"{args.local_host_ip}:{PORT[role]}"
    datadist.init(config.generate_options())
    logging.info("cluster %d initialized on device %d", CLUSTER[role], args.device_id)
    return datadist


def cache_desc():
    return CacheDesc(num_tensors=2 * N_LAYERS, shape=[ROWS, ROW_LEN],
                     data_type=DataType.DT_INT32, placement=Placement.DEVICE)


def run_prompt(datadist):
    manager = datadist.cache_manager
    tensors = [torch.full((ROWS, ROW_LEN), UNTOUCHED, dtype=torch.int32).npu()
               for _ in range(2 * N_LAYERS)]
    cache = manager.register_cache(cache_desc(), [t.data_ptr() for t in tensors])
    logging.info("registered cache %d (%d tensors)", cache.cache_id, len(tensors))
    announcement = [cache.cache_id]
    dist.broadcast_object_list(announcement, src=0)   # the decoder learns the cache id

    dist.barrier()  # the decoder has pushed
    wrong = []
    for index, (tensor, want) in enumerate(zip(tensors, expected_prompt_tensors())):
        got = tensor.cpu()
        if not torch.equal(got.view(torch.uint8), want.view(torch.uint8)):
            rows = [r for r in range(ROWS) if not torch.equal(got[r], want[r])]
            wrong.append(f"tensor {index} rows {rows}: {got[rows].tolist()}")
    if wrong:
        raise RuntimeError("pushed rows differ from the decoder's:\n" + "\n".join(wrong))
    logging.info("prompt verified %d tensors: pushed rows match byte for byte, other rows "
                 "untouched", len(tensors))
    logging.info("layer 0 K, row 0 starts %s", tensors[0].cpu()[0, :4].tolist())

    dist.barrier()  # the decoder has unlinked
    manager.unregister_cache(cache.cache_id)
    datadist.finalize()


def run_decoder(datadist, args):
    manager = datadist.cache_manager
    tensors = [decoder_tensor(t).npu() for t in range(2 * N_LAYERS)]
    cache = manager.register_cache(cache_desc(), [t.data_ptr() for t in tensors])
    announcement = [None]
    dist.broadcast_object_list(announcement, src=0)
    prompt_cache_id = announcement[0]
    logging.info("the prompt's cache is %d", prompt_cache_id)

    cluster = LLMClusterInfo()
    cluster.remote_cluster_id = CLUSTER["p"]
    cluster.append_local_ip_info(args.local_host_ip, PORT["d"])
    cluster.append_remote_ip_info(args.remote_host_ip, PORT["p"])
    ret, per_cluster = datadist.link_clusters([cluster], 5000)
    if ret != LLMStatusCode.LLM_SUCCESS:
        raise RuntimeError(f"link_clusters: {ret} {per_cluster}")

    for src_row, dst_row, src_layers, dst_layers in PUSHES:
        key = CacheKeyByIdAndIndex(cluster_id=CLUSTER["p"], cache_id=prompt_cache_id,
                                   batch_index=dst_row)
        manager.push_cache(key, cache, src_batch_index=src_row,
                           src_layer_range=src_layers, dst_layer_range=dst_layers)
        logging.info("pushed row %d (layers %d-%d) to prompt row %d (layers %d-%d)", src_row,
                     src_layers.start, src_layers.stop - 1, dst_row, dst_layers.start,
                     dst_layers.stop - 1)
    dist.barrier()  # pushes done

    cluster = LLMClusterInfo()
    cluster.remote_cluster_id = CLUSTER["p"]
    cluster.append_remote_ip_info(args.remote_host_ip, PORT["p"])
    ret, per_cluster = datadist.unlink_clusters([cluster], 5000)
    if ret != LLMStatusCode.LLM_SUCCESS:
        raise RuntimeError(f"unlink_clusters: {ret} {per_cluster}")
    dist.barrier()  # unlinked
    manager.unregister_cache(cache.cache_id)
    datadist.finalize()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--role", choices=("p", "d"), required=True)
    parser.add_argument("--device_id", type=int, default=0)
    parser.add_argument("--local_host_ip", required=True)
    parser.add_argument("--remote_host_ip", required=True)
    args = parser.parse_args()
    torch.npu.set_device(args.device_id)
    join_group(args.role, args)
    datadist = open_datadist(args.role, args)
    if args.role == "p":
        run_prompt(datadist)
    else:
        run_decoder(datadist, args)
    logging.info("%s finished", "prompt" if args.role == "p" else "decoder")


if __name__ == "__main__":
    main()
