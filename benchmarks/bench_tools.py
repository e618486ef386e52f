"""Tool speed: concurrent web search and local BM25.

1. Eight queries in one ``search`` call against a local stand-in server with 200 ms latency, next to one
   query alone and to eight queries one after another (target: 8 concurrent <= 1.5x one query).
2. BM25 over the medium offline world (~3,000 pages): median time per query over distinct queries
   (target: < 5 ms), next to bm25s's raw scoring of the same queries.

Run: ``.venv/bin/python benchmarks/bench_tools.py`` (about 15 s).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ["SERPER_KEY_ID"] = "bench-dummy-key"  # the stand-in server accepts anything


def bench_concurrency(latency_s: float = 0.2, repeats: int = 3) -> dict:
    from venus_utils.tools import SerperSearch
    from venus_utils.tools.stub_server import StubServer

    queries = [f"query number {i}" for i in range(8)]
    with StubServer(latency_s=latency_s) as stub:
        search = SerperSearch(api_url=stub.url + "/search", timeout=10)

        def timed(coro_factory) -> float:
            best = float("inf")
            for _ in range(repeats):
                t0 = time.perf_counter()
                asyncio.run(coro_factory())
                best = min(best, time.perf_counter() - t0)
            return best

        one = timed(lambda: search.search(queries[:1]))
        eight = timed(lambda: search.search(queries))

        async def sequential():
            for q in queries:
                await search.search([q])

        seq = timed(sequential)
    return {"one_query_s": one, "eight_concurrent_s": eight, "eight_sequential_s": seq, "ratio": eight / one}


def bench_bm25(n_queries: int = 400) -> dict:
    import numpy as np

    from venus_utils.core.world_store import load_pages
    from venus_utils.tools import LocalSearch
    from venus_utils.tools.common import words
    from venus_utils.world import build_world

    with tempfile.TemporaryDirectory() as tmp:
        build_world(tmp, seed=0, size="medium", progress=False)
        pages = load_pages(tmp)
    search = LocalSearch(pages, top_k=10)
    rng = np.random.default_rng(0)
    titles = [pages[i]["title"] for i in rng.permutation(len(pages))[:n_queries]]
    queries = [f"{t} born" if i % 3 == 0 else t for i, t in enumerate(titles)]
    times, raw = [], []
    for q in queries:
        t0 = time.perf_counter()
        search.hits(q)
        times.append(time.perf_counter() - t0)
        tokens = [w for w in words(q) if w in search._vocab]
        t0 = time.perf_counter()
        search._bm25.get_scores(tokens)
        raw.append(time.perf_counter() - t0)
    return {
        "pages": len(pages),
        "queries": len(queries),
        "median_ms": 1000 * statistics.median(times),
        "p95_ms": 1000 * float(np.percentile(times, 95)),
        "raw_scoring_median_ms": 1000 * statistics.median(raw),
    }


def main() -> None:
    c = bench_concurrency()
    print(
        f"web search, 200 ms server latency: one query {c['one_query_s'] * 1000:.0f} ms | eight concurrent "
        f"{c['eight_concurrent_s'] * 1000:.0f} ms | eight sequential {c['eight_sequential_s'] * 1000:.0f} ms"
    )
    print(
        f"  ratio eight-concurrent / one = {c['ratio']:.2f}x (target <= 1.5x); "
        f"sequential / concurrent = {c['eight_sequential_s'] / c['eight_concurrent_s']:.1f}x"
    )
    b = bench_bm25()
    print(
        f"BM25 over the medium world ({b['pages']} pages, {b['queries']} distinct queries): median "
        f"{b['median_ms']:.2f} ms/query, p95 {b['p95_ms']:.2f} ms "
        f"(bm25s scoring alone {b['raw_scoring_median_ms']:.2f} ms)"
    )
    print(f"  ratio median / 5 ms target = {b['median_ms'] / 5:.2f}x (target < 1)")


if __name__ == "__main__":
    main()
