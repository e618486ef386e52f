"""The offline research world: a small synthetic encyclopedia, multi-hop questions and expert trajectories.

``build_world(out_dir, seed=0, size="small", **knobs)`` (knobs: :class:`WorldConfig`), or
``python -m venus_utils.world build --out DIR --seed N --size small``.

This package builds worlds; reading one (``load_pages``, ``load_world_meta``, ``load_world_questions``) is
:mod:`venus_utils.core.world_store`, which sits below the tools that the builder runs.
"""

from .build import WorldConfig, build_world

__all__ = ["WorldConfig", "build_world"]
