"""Which process of a run this is, and what the processes of a distributed run must agree on.

The stages run as one process or as several (``accelerate launch``, torchrun, ``notebook_launcher``): every process
runs the whole script, the main process (``RANK`` 0) alone writes the stage's shared files, and decisions that stop
or time training (a time limit, a schedule by wall time) are taken together, or DDP waits forever.  Outside a
distributed run the collectives return their argument unchanged.
"""

from __future__ import annotations

import os
import sys


def world_size() -> int:
    """Processes of this run (``accelerate launch``, torchrun and ``notebook_launcher`` set ``WORLD_SIZE``)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def is_main_process() -> bool:
    return int(os.environ.get("RANK", "0")) == 0


def _collective_device() -> str:
    import torch.distributed as dist

    return "cuda" if dist.get_backend() == "nccl" else "cpu"


def _distributed() -> bool:
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def any_process(flag: bool) -> bool:
    """``flag`` on any process of a distributed run (all must stop at the same step, or DDP waits forever)."""
    if not _distributed():
        return flag
    import torch
    import torch.distributed as dist

    t = torch.tensor([int(flag)], device=_collective_device())
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item())


def rank0_value(value: float) -> float:
    """``value`` as rank 0 has it, in a distributed run (every process must call this at the same point)."""
    if not _distributed():
        return value
    import torch
    import torch.distributed as dist

    t = torch.tensor([value], dtype=torch.float64, device=_collective_device())
    dist.broadcast(t, src=0)
    return float(t.item())


def leave(code: int = 0) -> None:
    """End this process of a distributed run once every process reached this point, without tearing gloo down.

    Freeing the last reference to a gloo process group (the DDP reducer holds one) joins its worker threads while
    holding the GIL, and a worker that is still freeing a finished collective's tensors waits for the GIL: torch's
    destructors then deadlock, and one process hangs after it wrote everything (seen in CI).  So every process waits
    at a barrier, flushes its streams and leaves with ``os._exit``; outside a distributed run this returns.  For the
    processes of ``accelerate launch`` and torchrun (the command lines); ``notebook_launcher`` waits for its function's
    return value instead."""
    if not _distributed():
        return
    import torch.distributed as dist

    dist.barrier()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(code)
