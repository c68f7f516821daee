"""What both ends of a launched Python program's llm_datadist calls agree on: which arguments a
call writes back into (kvsim.launch.python_calls runs the call, kvsim.launched.remote copies
the values into the program's own objects)."""
from kvsim import _core

_CONFIG_TYPES = (_core.TransferConfig, _core.TransferWithCacheKeyConfig)


def configs_in(value, out=None):
    """The TransferConfig-like objects in args (lists, tuples, dicts), in a fixed walk order:
    transfer_cache_async writes their src_layer_range back (spec §3.1)."""
    out = [] if out is None else out
    if isinstance(value, _CONFIG_TYPES):
        out.append(value)
    elif isinstance(value, (list, tuple)):
        for item in value:
            configs_in(item, out)
    elif isinstance(value, dict):
        for item in value.values():
            configs_in(item, out)
    return out
