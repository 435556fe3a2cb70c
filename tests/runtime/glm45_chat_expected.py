"""Prints the expected prompts of test_glm45_chat.cpp: each conversation
rendered by GLM-4.5's chat template with jinja2, the way transformers'
apply_chat_template renders it (ImmutableSandboxedEnvironment, trim_blocks,
lstrip_blocks, loopcontrols; its tojson filter: json.dumps with the given
ensure_ascii, keys unsorted), as the C++ initializers of kTemplateCases
(name, messages, tools, enable_thinking, generation prompt, expected text) to
paste there.

The template is read from src/tern/tokenizer/glm45_chat_template.h (where it
came from is written there; with --real PATH, from that tokenizer_config.json
or chat_template.jinja instead, to check the copy).

Tern's messages map to the template's inputs so: `reasoning` is
reasoning_content when not empty (absent otherwise); enable_thinking=False
is passed only when Tern's enable_thinking is false.

  python3 tests/runtime/glm45_chat_expected.py   # needs jinja2 (Debian: python3-jinja2)

Not a test itself (ctest runs tests/*/test_*.py only).
"""
import json
import re
import sys
from pathlib import Path

from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = Path(__file__).resolve().parents[2]


def template_text():
    if len(sys.argv) == 3 and sys.argv[1] == "--real":
        text = Path(sys.argv[2]).read_text(encoding="utf-8")
        return json.loads(text)["chat_template"] if sys.argv[2].endswith(".json") else text
    header = (ROOT / "src/tern/tokenizer/glm45_chat_template.h").read_text(encoding="utf-8")
    return re.search(r'R"TEMPLATE\((.*)\)TEMPLATE"', header, re.S).group(1)


def msg(role, content, reasoning=""):
    m = {"role": role, "content": content}
    if reasoning:
        m["reasoning_content"] = reasoning
    return m


def calls(content, *tool_calls):
    return {"role": "assistant", "content": content,
            "tool_calls": [{"type": "function", "function": {"name": n, "arguments": a}} for n, a in tool_calls]}


WEATHER = ("get_weather", {"city": "Paris"})
TIME = ("get_time", {})
MIXED = ("f", {"a": [1, 2], "b": "two words", "c": 3.5, "d": True, "e": None, "g": {"x": "é"}})
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
                                      "parameters": {"type": "object",
                                                     "properties": {"city": {"type": "string"}},
                                                     "required": ["city"]}}},
    {"type": "function", "function": {"name": "get_time", "description": "Heure (UTC) — now",
                                      "parameters": {"type": "object", "properties": {}}}},
]

# (name, messages, tools, enable_thinking, add_generation_prompt)
CASES = [
    ("UserOnly", [msg("user", "Hi")], None, True, True),
    ("UserOnlyNoGenerationPrompt", [msg("user", "Hi")], None, True, False),
    ("Empty", [], None, True, True),
    ("SystemFirst", [msg("system", "You are terse."), msg("user", "Hi")], None, True, True),
    ("MultiTurnDropsEarlierReasoning",
     [msg("user", "What is 2 + 2?"), msg("assistant", "4.", "Simple sum."), msg("user", "And 3 + 3?")],
     None, True, True),
    ("ReasoningAfterTheLastUserIsKept",
     [msg("user", "Hi"), msg("assistant", "  Hello!\n", "\nGreet back. ")], None, True, False),
    ("ThinkInContentIsSplit",
     [msg("user", "Hi"), msg("assistant", "<think>\nPonder.\n</think>\n\nHello!")], None, True, False),
    ("ThinkInEarlierContentIsDropped",
     [msg("user", "Hi"), msg("assistant", "<think>Ponder.</think>Hello!"), msg("user", "Bye")], None, True, True),
    ("EmptyAssistant", [msg("user", "Hi"), msg("assistant", ""), msg("user", "Hm?")], None, True, True),
    ("NoThinking", [msg("system", "S"), msg("user", "Hi"), msg("assistant", "Yo"), msg("user", "Bye")],
     None, False, True),
    ("NoThinkingKeepsAnExistingNothink", [msg("user", "Hi /nothink")], None, False, True),
    ("LateSystem", [msg("user", "Hi"), msg("system", "Now be brief."), msg("user", "Go")], None, True, True),
    ("Unicode", [msg("user", "Ça va? 東京 😀\n\nline"), msg("assistant", "Oui ✓")], None, True, True),
    ("ToolsListed", [msg("system", "Use tools."), msg("user", "Weather in Paris?")], TOOLS, True, True),
    ("ToolCallThenAnswer",
     [msg("user", "Weather in Paris?"), calls("", WEATHER), msg("tool", '{"temp": 20}'),
      msg("assistant", "It is 20 °C."), msg("user", "Thanks")], TOOLS, True, True),
    ("TextReasoningAndTwoCalls",
     [msg("user", "Weather and time?"),
      dict(calls("Let me check.", WEATHER, TIME), reasoning_content="Two tools."),
      msg("tool", "sunny"), msg("tool", "12:00")], None, True, True),
    ("ArgumentTypes", [msg("user", "x"), calls("", MIXED)], None, True, False),
    ("ToolResultsSeparatedByAnAssistant",
     [msg("user", "x"), calls("", WEATHER), msg("tool", "1"), calls("", TIME), msg("tool", "2"),
      msg("assistant", "done")], None, True, True),
]


def cpp(s):
    out = '"'
    for ch in s:
        out += {"\\": "\\\\", '"': '\\"', "\n": "\\n"}.get(ch, ch)
    return out + '"'


def cpp_message(m):
    parts = [cpp(m["role"]), cpp(m["content"])]
    if m.get("reasoning_content") or m.get("tool_calls"):
        parts.append(cpp(m.get("reasoning_content", "")))
    if m.get("tool_calls"):
        tc = ", ".join(f"{{{cpp(c['function']['name'])}, {cpp(json.dumps(c['function']['arguments'], ensure_ascii=False))}}}"
                       for c in m["tool_calls"])
        parts.append(f"{{{tc}}}")
    return "{" + ", ".join(parts) + "}"


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


BREAKS = ("<|user|>", "<|assistant|>", "<|system|>", "<|observation|>", "</tool_call>", "</tool_response>",
          "</tools>\n")


def main():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    template = env.from_string(template_text())
    for name, messages, tools, thinking, generation_prompt in CASES:
        kwargs = {} if thinking else {"enable_thinking": False}
        text = template.render(messages=messages, tools=tools, add_generation_prompt=generation_prompt, **kwargs)
        parts = re.split("|".join(f"(?={re.escape(b)})" for b in BREAKS[:4]) + "|" +
                         "|".join(f"(?<={re.escape(b)})" for b in BREAKS[4:]), text)
        print(f"    {{{cpp(name)},\n     {{{', '.join(cpp_message(m) for m in messages)}}},\n"
              f"     {'true' if tools else 'false'}, {'true' if thinking else 'false'}, "
              f"{'true' if generation_prompt else 'false'},\n     " +
              "\n     ".join(cpp(p) for p in parts if p) + "},")


if __name__ == "__main__":
    main()
