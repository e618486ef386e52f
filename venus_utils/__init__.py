"""venus_utils: the tested library behind the venus-recipe notebooks.

The notebooks in ``notebooks/`` teach the DR-Venus recipe stage by stage; every piece of logic they call
lives here, one package per stage (``data``, ``world``, ``tools``, ``agent``, ``modeling``, ``sft``, ``rl``,
``eval``, ``demo``) between two others: ``core``, the foundations every stage uses (``paths``, ``io``, ``env``,
``protocol``, ``validation``, ``stage``, ``profiles``, ``defaults``, ``locks``, ``checkpoints``, ``distributed``...),
and ``run``, what drives a run from above (``pipeline``, ``schemas``, ``cli``, ``html_book``).  Heavy or optional
dependencies (torch, unsloth, vllm) are imported inside the functions that need them, so ``import venus_utils`` stays
cheap.
"""

__version__ = "0.1.0"
