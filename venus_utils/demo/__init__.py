"""Watching the agent work: step cards (notebook 06, the web demo, replays of saved traces) and the web demo.

- :mod:`.cards`: a message list -> steps -> HTML cards or a printed trace;
- :mod:`.display`: the notebook views (``LiveCards``, ``show_trace``);
- :mod:`.runs`: one stoppable run in a background thread, the demo's settings and input limits;
- :mod:`.app`: the Gradio app (``python -m venus_utils.demo``; Gradio is imported only there).
"""

from .cards import Step, load_trace, render_html, render_text, steps_from_messages
from .display import LiveCards, pick_question, replay, show_trace
from .runs import DemoSettings, InputError, Run, normalize_base_url

__all__ = [
    "DemoSettings",
    "InputError",
    "LiveCards",
    "Run",
    "Step",
    "load_trace",
    "normalize_base_url",
    "pick_question",
    "render_html",
    "render_text",
    "replay",
    "show_trace",
    "steps_from_messages",
]
