"""Step cards in a notebook: an ipywidgets HTML feed when a person watches, a printed trace under Papermill.

    view = LiveCards(interactive=True)   # in notebook 06: interactive is a parameter (False in the profiles)
    agent_run(question, on_messages=view.update)
    view.finish(final_messages)

``interactive=False`` prints each step once, when it is complete (a tool call is printed with its result),
so an executed notebook carries a readable trace and no widget state.
"""

from __future__ import annotations

from pathlib import Path

from ..core.paths import WORLD_DIR, dr_venus_dir
from .cards import Step, load_trace, render_html, render_text, step_text, steps_from_messages


class LiveCards:
    """A live research feed for one run; ``update(messages)`` may be called after every message."""

    def __init__(self, interactive: bool = True, **render_kwargs):
        self.interactive = interactive
        self.render_kwargs = render_kwargs
        self.printed = 0
        self.steps: list[Step] = []
        self.widget = None
        if interactive:
            import ipywidgets
            from IPython.display import display

            self.widget = ipywidgets.HTML(value=render_html([]))
            display(self.widget)

    def update(self, messages: list[dict]) -> list[Step]:
        self.steps = steps_from_messages(messages)
        if self.widget is not None:
            self.widget.value = render_html(self.steps, **self.render_kwargs)
        else:
            done = len(self.steps) - (1 if self.steps and self.steps[-1].pending else 0)
            for step in self.steps[self.printed : done]:
                print(step_text(step, **self.render_kwargs), flush=True)
            self.printed = max(self.printed, done)
        return self.steps

    def finish(self, messages: list[dict]) -> list[Step]:
        steps = self.update(messages)
        if self.widget is None:
            for step in steps[self.printed :]:
                print(step_text(step, **self.render_kwargs), flush=True)
            self.printed = len(steps)
        return steps


def show_trace(
    messages: list[dict], interactive: bool = True, max_steps: int | None = None, **render_kwargs
) -> list[Step]:
    """Show a whole saved trace (e.g. a shared RL rollout): HTML cards or printed text.

    ``max_steps`` keeps the question, the first steps and the final answer (long rollouts have 80 turns).
    """
    steps = steps_from_messages(messages)
    shown = steps
    if max_steps is not None and len(steps) > max_steps + 2:
        skipped = len(steps) - max_steps - 2
        shown = steps[: max_steps + 1] + [Step("note", text=f"… {skipped} steps not shown …")] + steps[-1:]
    if interactive:
        from IPython.display import HTML, display

        display(HTML(render_html(shown, **render_kwargs)))
    else:
        print(render_text(shown, **render_kwargs))
    return steps


def pick_question(run_dir, question: str | None = None) -> tuple[str, str | None]:
    """``(question, ground truth)``: the given question (no ground truth), else the first of the run's offline
    world test split."""
    if question:
        return question, None

    from ..core.qa_files import load_questions

    path = Path(run_dir) / WORLD_DIR / "qa" / "test.parquet"
    if not path.exists():
        raise FileNotFoundError(f"{path}: no offline world test split to take a question from; set `question`")
    test = load_questions(path)
    return test.loc[0, "question"], test.loc[0, "answer"]


def replay(path, interactive: bool = True, max_steps: int | None = 6) -> dict | None:
    """Show a saved trace as cards; ``path="auto"`` is a shared DR-Venus RL rollout.  Returns what was replayed,
    or None (with a printed note) when the file is absent."""

    if path == "auto":
        path = dr_venus_dir() / "rl_rollouts" / "0000.json"
    if path is None or not Path(path).exists():
        print(f"No trace to replay ({path}); skipped.")
        return None
    steps = show_trace(load_trace(path)["messages"], interactive, max_steps=max_steps)
    return {"file": str(path), "steps": len(steps), "final": steps[-1].text if steps[-1].kind == "answer" else None}
