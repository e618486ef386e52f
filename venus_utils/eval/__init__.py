"""Evaluation: answers (normalisation, aliases, EM, token F1), the judge, held-out scores, statistics and metrics.

- :mod:`venus_utils.eval.answers` — the one EM / F1 implementation of the project;
- :mod:`venus_utils.eval.judge` — the one judge (BrowseComp-prompt LLM judge, or a deterministic offline
  judge when no endpoint is configured);
- :mod:`venus_utils.eval.metrics`, :mod:`venus_utils.eval.plots` — tables and figures of the evaluation notebook
  (the question files, the world's and the benchmarks', are read by :mod:`venus_utils.core.qa_files`).

Submodules are imported on use, so ``import venus_utils.eval`` stays cheap.
"""
