"""venus_utils: the tested library behind the venus-recipe notebooks.

The notebooks in ``notebooks/`` teach the DR-Venus recipe stage by stage; every piece of logic they call
lives here, one module per stage (``data``, ``world``, ``tools``, ``agent``, ``modeling``, ``sft``, ``rl``,
``eval``, ``demo``) plus the shared plumbing (``paths``, ``config``, ``io``, ``stage``, ``env``,
``protocol``, ``pipeline``).  Heavy or optional dependencies (torch, unsloth, vllm) are imported inside the
functions that need them, so ``import venus_utils`` stays cheap.
"""

__version__ = "0.1.0"
