"""Prompt and decoder on the same server, each on its own NPU: the decoder pulls PA blocks over
an HCCL comm domain, then swaps blocks between its device cache and a CPU cache with
swap_blocks. The rank table (v1.2, one server) is written from what the machine shows: the
first two NPUs listed as /dev/davinciN (the prompt takes the first, the decoder the second)
and their IPs as `hccn_tool -i N -ip -g` reports them. The CPU cache is made with
Cache.create_cpu_cache over torch CPU tensors' data_ptr(). The decoder checks the pulled device
blocks, the CPU tensors after swapping out, and the device blocks after swapping back in.

    kvsim launch --nodes 1 --hosts 10.30.0.5 -- \\
        python3 pull_blocks_one_server.py --cluster_id 1 --host_ip 10.30.0.5 ::: \\
        python3 pull_blocks_one_server.py --cluster_id 2 --host_ip 10.30.0.5
"""
import argparse
import datetime
import json
import logging
import os
import re
import subprocess
import time

import torch
import torch.distributed as dist
from llm_datadist import (BlocksCacheKey, Cache, CacheDesc, DataType, LLMConfig, LLMDataDist,
                          LLMRole, Placement, RegisterMemStatus)

logging.basicConfig(format="%(asctime)s %(message)s", level=logging.INFO)

LAYERS = 2
DEVICE_BLOCKS = 8
CPU_BLOCKS = 5
BLOCK_ELEMS = 2048                      # float32: 8 KiB blocks
PULL = ([1, 2, 3, 6], [0, 1, 2, 5])     # prompt blocks -> decoder blocks
SWAP_OUT = {0: 3, 1: 0, 2: 1, 5: 2}     # decoder device block -> CPU block (CPU 4 stays)
SWAP_IN = {3: 7, 4: 6}                  # CPU block -> decoder device block
CPU_FILL = -3.5
DEVICE_FILL = -1.25


def prompt_block(tensor, block):
    """Prompt block contents: integers below 2**24, so exact in float32, unique per element."""
    return (tensor * 100000 + block * 10000 + torch.arange(BLOCK_ELEMS)).float()


def npus_on_this_server():
    found = [int(m.group(1)) for m in map(re.compile(r"davinci(\d+)$").match, os.listdir("/dev"))
             if m]
    return sorted(found)


def npu_ip(phy_id):
    out = subprocess.run(["hccn_tool", "-i", str(phy_id), "-ip", "-g"], capture_output=True,
                         text=True, check=True).stdout
    for line in out.splitlines():
        name, _, value = line.partition(":")
        if name.strip() == "ipaddr":
            return value.strip()
    raise RuntimeError(f"hccn_tool printed no ipaddr for device {phy_id}: {out!r}")


def server_rank_table(host_ip, devices):
    entries = [{"device_id": str(d), "device_ip": npu_ip(d), "rank_id": str(rank)}
               for rank, d in enumerate(devices)]
    return {"version": "1.2", "status": "completed", "server_count": "1",
            "server_list": [{"server_id": host_ip, "host_ip": host_ip, "device": entries}]}


def link_and_wait(datadist, table):
    comm_id = datadist.link("one_server", {1: 0, 2: 1}, json.dumps(table))
    while (status := datadist.query_register_mem_status(comm_id)) != RegisterMemStatus.OK:
        if status == RegisterMemStatus.FAILED:
            raise RuntimeError("the comm domain could not be formed")
        logging.info("comm domain not ready yet (%s)", status)
        time.sleep(1)
    logging.info("comm domain %d ready", comm_id)
    return comm_id


def blocks_desc(blocks, placement):
    return CacheDesc(2 * LAYERS, [blocks, BLOCK_ELEMS], DataType.DT_FLOAT, placement)


def check(what, got, want):
    for block in range(want.shape[0]):
        if not torch.equal(got[block].view(torch.int32), want[block].view(torch.int32)):
            raise RuntimeError(f"{what}, block {block}: got {got[block][:3].tolist()}..., "
                               f"want {want[block][:3].tolist()}...")


def run_prompt(datadist, table):
    tensors = [torch.stack([prompt_block(t, b) for b in range(DEVICE_BLOCKS)]).npu()
               for t in range(2 * LAYERS)]
    cache = datadist.cache_manager.register_blocks_cache(
        blocks_desc(DEVICE_BLOCKS, Placement.DEVICE), [t.data_ptr() for t in tensors],
        BlocksCacheKey(1, 0))
    comm_id = link_and_wait(datadist, table)
    dist.barrier()  # ready to be pulled
    dist.barrier()  # pulled
    datadist.unlink(comm_id)
    dist.barrier()  # both unlinked
    datadist.cache_manager.unregister_cache(cache.cache_id)
    datadist.finalize()


def run_decoder(datadist, table):
    manager = datadist.cache_manager
    tensors = [torch.full((DEVICE_BLOCKS, BLOCK_ELEMS), DEVICE_FILL).npu()
               for _ in range(2 * LAYERS)]
    cache = manager.register_blocks_cache(blocks_desc(DEVICE_BLOCKS, Placement.DEVICE),
                                          [t.data_ptr() for t in tensors])
    comm_id = link_and_wait(datadist, table)
    dist.barrier()  # ready to be pulled
    manager.pull_blocks(BlocksCacheKey(1, 0), cache, src_blocks=PULL[0], dst_blocks=PULL[1])
    expected = [torch.full((DEVICE_BLOCKS, BLOCK_ELEMS), DEVICE_FILL) for _ in tensors]
    for t, want in enumerate(expected):
        for src, dst in zip(*PULL):
            want[dst] = prompt_block(t, src)
        check(f"device tensor {t} after pull_blocks", tensors[t].cpu(), want)
    logging.info("pulled blocks %s into %s: verified", *PULL)

    cpu_tensors = [torch.full((CPU_BLOCKS, BLOCK_ELEMS), CPU_FILL) for _ in tensors]
    cpu_cache = Cache.create_cpu_cache(blocks_desc(CPU_BLOCKS, Placement.HOST),
                                       [t.data_ptr() for t in cpu_tensors])
    manager.swap_blocks(cache, cpu_cache, SWAP_OUT)
    for t, cpu in enumerate(cpu_tensors):
        want = torch.full((CPU_BLOCKS, BLOCK_ELEMS), CPU_FILL)
        for dev_block, cpu_block in SWAP_OUT.items():
            want[cpu_block] = expected[t][dev_block]
        check(f"CPU tensor {t} after swapping out", cpu, want)
    logging.info("swapped out %s: CPU tensors verified", SWAP_OUT)

    for tensor in tensors:
        tensor[6:8].zero_()
    manager.swap_blocks(cpu_cache, cache, SWAP_IN)
    for t, tensor in enumerate(tensors):
        for cpu_block, dev_block in SWAP_IN.items():
            expected[t][dev_block] = cpu_tensors[t][cpu_block]
        check(f"device tensor {t} after swapping in", tensor.cpu(), expected[t])
    logging.info("swapped in %s: device tensors verified", SWAP_IN)

    dist.barrier()  # pulled
    datadist.unlink(comm_id)
    dist.barrier()  # both unlinked
    manager.unregister_cache(cache.cache_id)
    datadist.finalize()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cluster_id", type=int, choices=[1, 2], required=True)
    parser.add_argument("--host_ip", required=True)
    args = parser.parse_args()
    devices = npus_on_this_server()[:2]
    if len(devices) < 2:
        raise RuntimeError(f"this sample needs two NPUs on the server, found {devices}")
    rank = args.cluster_id - 1
    device = devices[rank]
    logging.info("cluster %d uses NPU %d of %s", args.cluster_id, device, devices)
    torch.npu.set_device(device)
    os.environ.update(MASTER_ADDR=args.host_ip, MASTER_PORT="29640")
    dist.init_process_group("gloo", rank=rank, world_size=2,
                            timeout=datetime.timedelta(seconds=60))
    datadist = LLMDataDist(LLMRole.PROMPT if rank == 0 else LLMRole.DECODER, args.cluster_id)
    config = LLMConfig()
    config.device_id = device
    config.enable_cache_manager = True
    datadist.init(config.generate_options())
    table = server_rank_table(args.host_ip, devices)
    (run_prompt if rank == 0 else run_decoder)(datadist, table)
    logging.info("cluster %d finished", args.cluster_id)


if __name__ == "__main__":
    main()
