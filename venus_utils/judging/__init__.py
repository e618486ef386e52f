"""Answers and the judge, below every package that scores an answer (the cleaner of stage 01, the evaluation, RL's
outcome reward).

- :mod:`venus_utils.judging.answers`: the one answer normalisation, alias matching, EM and token F1 of the project;
- :mod:`venus_utils.judging.judge`: the one judge (BrowseComp-prompt LLM judge, or the exact offline judge when no
  endpoint is configured).
"""
