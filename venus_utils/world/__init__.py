"""The offline research world: a small synthetic encyclopedia, multi-hop questions and expert trajectories.

``build_world(out_dir, seed=0, size="small", **knobs)`` (knobs: :class:`WorldConfig`), or
``python -m venus_utils.world build --out DIR --seed N --size small``.
"""

from .build import WorldConfig, build_world, load_pages, load_world_meta, load_world_questions

__all__ = ["WorldConfig", "build_world", "load_pages", "load_world_meta", "load_world_questions"]
