"""Stage 01-02 data work: cleaning, correctness filtering, token accounting and turn-aware resampling.

- :mod:`~venus_utils.data.clean` — the cleaner (``python -m venus_utils.data.clean``), :class:`CleanConfig`,
  :func:`run_clean`; ``--compat reference`` reproduces DR-Venus's ``prepare_trajectories.py``; its modules in a
  run's order: ``clean/batches.py`` (:class:`CleanConfig`, the worker processes that clean the input batches, the
  output folder's lock), ``clean/shards.py`` (``--shard`` / ``--merge-shards``) and ``clean/finish.py`` (the
  finishing steps: filters, judge, resampling, split, writing, ``stats.json``);
- :mod:`~venus_utils.data.rules` — the per-row rules of DR-Venus's ``prepare_trajectories.py`` and the strict
  mode's fixes of its defects;
- :mod:`~venus_utils.data.search_text` — raw Serper search text -> the SFT search JSON;
- :mod:`~venus_utils.data.resample` — :class:`ResamplePolicy`, resampling and the train/val split;
- :mod:`~venus_utils.data.tokens` — token accounting with the training tokenizer;
- :mod:`~venus_utils.data.sources` — reading parquet / JSON / JSONL inputs;
- :mod:`~venus_utils.data.synthetic` — synthetic raw REDSearcher trajectories (fixtures, benchmark);
- :mod:`~venus_utils.data.curation_report` — tables and figures of notebooks 01 and 02.
"""
