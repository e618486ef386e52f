"""The agent's tools, ``search`` and ``visit``: one interface (:class:`Toolbox`), local and web backends.

- ``LocalSearch`` (BM25 over the offline world) and ``SerperSearch`` (Google via Serper);
- ``LocalVisit`` (the world page, goal-matching sentences) and ``JinaVisit`` (Jina Reader + LLM extractor);
- ``serper_raw_text``: the raw Serper text of REDSearcher trajectories (what the cleaner parses);
- model-facing formats live in :mod:`venus_utils.core.protocol` (``search_results_json``, ``visit_result_text``).

CLI: ``python -m venus_utils.tools search "q1" "q2" --world DIR`` / ``visit URL --goal "..." --world DIR``.
"""

from .common import DiskCache, SearchHit
from .search import LocalSearch, SerperSearch, make_snippet, model_search_text, raw_search_text, serper_raw_text
from .toolbox import Toolbox, make_toolbox
from .visit import JinaVisit, LocalVisit, select_sentences

__all__ = [
    "DiskCache",
    "JinaVisit",
    "LocalSearch",
    "LocalVisit",
    "SearchHit",
    "SerperSearch",
    "Toolbox",
    "make_snippet",
    "make_toolbox",
    "model_search_text",
    "raw_search_text",
    "select_sentences",
    "serper_raw_text",
]
