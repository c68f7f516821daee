"""Shared set-up of the examples: one prompt (P) and one decoder (D) process in one world."""
import kvsim
from llm_datadist import LLMClusterInfo, LLMConfig, LLMDataDist, LLMRole

PORT = 26000


def init_llm_datadist(role, cluster_id, device_id, listen, **config):
    """LLMDataDist on device_id, listening on the device's IP when listen is True."""
    datadist = LLMDataDist(role, cluster_id)
    llm_config = LLMConfig()
    llm_config.device_id = device_id
    if listen:
        llm_config.listen_ip_info = f"{kvsim.device_ip(device_id)}:{PORT}"
    for key, value in config.items():
        setattr(llm_config, key, value)
    datadist.init(llm_config.generate_options())
    return datadist


def cluster_info(remote_cluster_id, local_device, remote_device):
    """LLMClusterInfo as the official samples fill it, with the simulated devices' IPs."""
    cluster = LLMClusterInfo()
    cluster.remote_cluster_id = remote_cluster_id
    cluster.append_local_ip_info(kvsim.device_ip(local_device), PORT)
    cluster.append_remote_ip_info(kvsim.device_ip(remote_device), PORT)
    return cluster


__all__ = ["LLMRole", "cluster_info", "init_llm_datadist"]
