"""The Qwen3-4B-Thinking-2507 chat template, re-typed (no hub access), and its training variant.

DR-Venus fine-tunes Qwen3-4B-Thinking-2507 and renders every trajectory with that model's own template, so the
tiny offline model carries the same template: whatever the tiny model learns is laid out exactly as the real
one would see it.

``QWEN3_THINKING_TEMPLATE`` is TRL's packaged ``trl/chat_templates/qwen3.jinja`` (the original Qwen3 template)
with the one change that makes it the *Thinking-2507* template: the generation prompt always opens the reasoning,
``<|im_start|>assistant\\n<think>\\n``, and the ``enable_thinking`` switch is gone (the 2507 Thinking model cannot
answer without thinking).  Unsloth ships the same text as its ``qwen3-thinking`` template
(``unsloth/chat_templates.py``); ``tests/modeling`` checks both equalities against the installed packages.

What the template does that matters for agent training (all kept byte for byte):

- an assistant message ``<think>\\nR\\n</think>\\nC`` is split into reasoning ``R`` and content ``C`` and
  re-rendered as ``<think>\\nR\\n</think>\\n\\nC`` (note the blank line the template inserts);
- the reasoning of assistant turns *before the last real user query* is dropped; a user message whose content
  starts with ``<tool_response>`` and ends with ``</tool_response>`` is a tool result, not a query, so in a
  DR-Venus trajectory the last query is the question and every turn keeps its reasoning;
- a ``tool`` role message renders exactly like a user message wrapped in ``<tool_response>\\n...\\n</tool_response>``;
- with ``tools=[...]`` the ``# Tools`` block is appended to the system prompt.  DR-Venus renders with
  ``tools=None`` because its system prompt already contains that block (``venus_utils.core.protocol.system_prompt``).

``QWEN3_THINKING_TRAINING_TEMPLATE`` adds ``{% generation %}`` markers for TRL's ``assistant_only_loss`` (and
``return_assistant_tokens_mask``).  The marked span is everything after ``<|im_start|>assistant\\n<think>\\n``
up to and including ``<|im_end|>\\n``: the DR-Venus loss mask (verl's ``MultiTurnSFTDataset``).  Like TRL's
``qwen3_training.jinja`` it always renders the reasoning, which changes nothing for DR-Venus trajectories (one
query) and makes the template prefix-preserving.  The recipe itself builds the mask with
``venus_utils.sft.tokenize_conversation``; the training variant is for users who hand conversations to TRL
directly, and the tests check that both give the same mask.
"""

from __future__ import annotations

GENERATION_PROMPT = "<|im_start|>assistant\n<think>\n"

# Template lines longer than the code's line length are split across adjacent raw strings: the text is unchanged.
_HEADER = (
    r"""{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0].role == 'system' %}
        {{- messages[0].content + '\n\n' }}
    {%- endif %}
    {{- "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"""
    r"""You are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within """
    r"""<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, """
    r"""\"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- else %}
    {%- if messages[0].role == 'system' %}
        {{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
    {%- set index = (messages|length - 1) - loop.index0 %}
    {%- if ns.multi_step_tool and message.role == "user" and message.content is string and not("""
    r"""message.content.startswith('<tool_response>') and message.content.endswith('</tool_response>')) %}
        {%- set ns.multi_step_tool = false %}
        {%- set ns.last_query_index = index %}
    {%- endif %}
{%- endfor %}
{%- for message in messages %}
    {%- if message.content is string %}
        {%- set content = message.content %}
    {%- else %}
        {%- set content = '' %}
    {%- endif %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\n' + content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {%- set reasoning_content = '' %}
        {%- if message.reasoning_content is string %}
            {%- set reasoning_content = message.reasoning_content %}
        {%- else %}
            {%- if '</think>' in content %}
                {%- set reasoning_content = content.split('</think>')[0].rstrip('\n')"""
    r""".split('<think>')[-1].lstrip('\n') %}
                {%- set content = content.split('</think>')[-1].lstrip('\n') %}
            {%- endif %}
        {%- endif %}
"""
)

_ASSISTANT_INFERENCE = (
    r"""        {%- if loop.index0 > ns.last_query_index %}
            {%- if loop.last or (not loop.last and reasoning_content) %}
                {{- '<|im_start|>' + message.role + '\n<think>\n' + reasoning_content.strip('\n') """
    r"""+ '\n</think>\n\n' + content.lstrip('\n') }}
            {%- else %}
                {{- '<|im_start|>' + message.role + '\n' + content }}
            {%- endif %}
        {%- else %}
            {{- '<|im_start|>' + message.role + '\n' + content }}
        {%- endif %}
"""
)

_TOOL_CALLS = r"""        {%- if message.tool_calls %}
            {%- for tool_call in message.tool_calls %}
                {%- if (loop.first and content) or (not loop.first) %}
                    {{- '\n' }}
                {%- endif %}
                {%- if tool_call.function %}
                    {%- set tool_call = tool_call.function %}
                {%- endif %}
                {{- '<tool_call>\n{"name": "' }}
                {{- tool_call.name }}
                {{- '", "arguments": ' }}
                {%- if tool_call.arguments is string %}
                    {{- tool_call.arguments }}
                {%- else %}
                    {{- tool_call.arguments | tojson }}
                {%- endif %}
                {{- '}\n</tool_call>' }}
            {%- endfor %}
        {%- endif %}
        {{- '<|im_end|>\n' }}
"""

_FOOTER = r"""    {%- elif message.role == "tool" %}
        {%- if loop.first or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n<think>\n' }}
{%- endif %}"""

QWEN3_THINKING_TEMPLATE = _HEADER + _ASSISTANT_INFERENCE + _TOOL_CALLS + _FOOTER

_ASSISTANT_TRAINING = r"""        {{- '<|im_start|>' + message.role + '\n<think>\n' }}
        {%- generation %}
        {{- reasoning_content.strip('\n') + '\n</think>\n\n' + content.lstrip('\n') }}
"""

QWEN3_THINKING_TRAINING_TEMPLATE = (
    _HEADER
    + _ASSISTANT_TRAINING
    + _TOOL_CALLS.replace(
        "        {{- '<|im_end|>\\n' }}\n", "        {{- '<|im_end|>\\n' }}\n        {%- endgeneration %}\n"
    )
    + _FOOTER
)
