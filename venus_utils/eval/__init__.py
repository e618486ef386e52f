"""Evaluation: held-out scores, statistics, metrics and the reports the evaluator prints.

- :mod:`venus_utils.eval.heldout`: the one held-out evaluation (questions drawn once per run, greedy answers, scored
  with the judge of :mod:`venus_utils.judging`, which sits below this package with the answer matching);
- :mod:`venus_utils.eval.stats`: intervals and paired tests; :mod:`venus_utils.eval.study`: a registered multi-seed
  study read by its rule; :mod:`venus_utils.eval.by_tool`: what training turns gained and were pushed, by tool;
- :mod:`venus_utils.eval.metrics`, :mod:`venus_utils.eval.plots`: tables and figures of the evaluation notebook
  (the question files, the world's and the benchmarks', are read by :mod:`venus_utils.core.qa_files`);
- :mod:`venus_utils.eval.shipped`: the models shipped in ``models/`` and the record a test holds them to.

Submodules are imported on use, so ``import venus_utils.eval`` stays cheap.
"""
