"""DR-Venus's published numbers, for tables that put a run beside the paper (README and notebooks).

Source: inclusionAI/DR-Venus README and arXiv 2604.19859 (judged accuracy, %).
"""

from __future__ import annotations

BENCHMARKS = ("BrowseComp", "BrowseComp-ZH", "GAIA (Text)", "xBench-DS-2505", "xBench-DS-2510", "DeepSearchQA")

#: model -> benchmark -> accuracy (%); None where the paper reports no number.
PAPER_RESULTS: dict[str, dict[str, float | None]] = {
    "DR-Venus-4B-SFT": dict(zip(BENCHMARKS, (26.8, 35.7, 65.4, 69.0, 35.3, 37.7))),
    "DR-Venus-4B-RL": dict(zip(BENCHMARKS, (29.1, 37.7, 64.4, 74.7, 40.7, 39.6))),
    "AgentCPM-Explore-4B": dict(zip(BENCHMARKS, (24.1, 29.1, 63.9, 70.0, 34.0, 32.8))),
    "WebExplorer-8B-RL": dict(zip(BENCHMARKS, (15.7, 32.0, 50.0, 53.7, 23.0, 17.8))),
}

#: The SFT data funnel: raw REDSearcher trajectories -> cleaned + correct -> after turn-aware resampling.
PAPER_FUNNEL = {"source": 10_001, "correct": 9_365, "resampled": 18_745}


def results_table():
    """The paper's results as a pandas DataFrame (models as rows)."""
    import pandas as pd

    return pd.DataFrame(PAPER_RESULTS).T[list(BENCHMARKS)]
