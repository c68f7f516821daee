"""Shared set-up of the examples: one prompt (P) and one decoder (D) engine in one world.

Each engine listens on its node's host address (kvsim.host_ip), at port 26000 + its device, as
the official samples listen on host_ip:26000 of their own servers.
"""
import kvsim
from llm_datadist import LLMClusterInfo, LLMConfig, LLMDataDist, LLMRole

PORT = 26000


def listen_address(device_id):
    """(host ip, port) of the engine on device_id."""
    return kvsim.host_ip(kvsim.node_of(device_id)), PORT + device_id


def init_llm_datadist(role, cluster_id, device_id, listen, **config):
    """A v2 (cache manager) LLMDataDist on device_id, listening when listen is True."""
    datadist = LLMDataDist(role, cluster_id)
    llm_config = LLMConfig()
    llm_config.device_id = device_id
    llm_config.enable_cache_manager = True
    if listen:
        ip, port = listen_address(device_id)
        llm_config.listen_ip_info = f"{ip}:{port}"
    for key, value in config.items():
        setattr(llm_config, key, value)
    datadist.init(llm_config.generate_options())
    return datadist


def cluster_info(remote_cluster_id, local_device, remote_device):
    """LLMClusterInfo as the official samples fill it: local host, remote listener."""
    cluster = LLMClusterInfo()
    cluster.remote_cluster_id = remote_cluster_id
    cluster.append_local_ip_info(kvsim.host_ip(kvsim.node_of(local_device)), 0)
    cluster.append_remote_ip_info(*listen_address(remote_device))
    return cluster


__all__ = ["LLMRole", "cluster_info", "init_llm_datadist"]
