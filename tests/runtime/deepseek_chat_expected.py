"""Prints the expected prompts of test_deepseek_chat.cpp: each conversation
rendered by DeepSeek-V3's real chat template with jinja2, the way
transformers' apply_chat_template renders it (ImmutableSandboxedEnvironment,
trim_blocks, lstrip_blocks; bos_token, eos_token and add_generation_prompt
passed in), as the C++ initializers of kTemplateCases (name, messages, generation
prompt, expected text) to paste there.

The template is read from src/tern/tokenizer/deepseek_v3_chat_template.h
(the verbatim text of DeepSeek-V3's tokenizer_config.json; with --real PATH,
from that tokenizer_config.json instead, to check the copy). With --r1 first,
DeepSeek-R1's (deepseek_r1_chat_template.h) renders CASES + R1_CASES, for
kR1TemplateCases.

  python3 tests/runtime/deepseek_chat_expected.py [--r1]  # needs jinja2 (Debian: python3-jinja2)

Not a test itself (ctest runs tests/*/test_*.py only).
"""
import json
import re
import sys
from pathlib import Path

from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = Path(__file__).resolve().parents[2]


R1 = len(sys.argv) > 1 and sys.argv[1] == "--r1"
ARGS = sys.argv[2:] if R1 else sys.argv[1:]


def template_text():
    if len(ARGS) == 2 and ARGS[0] == "--real":
        return json.loads(Path(ARGS[1]).read_text(encoding="utf-8"))["chat_template"]
    name = "deepseek_r1_chat_template.h" if R1 else "deepseek_v3_chat_template.h"
    header = (ROOT / "src/tern/tokenizer" / name).read_text(encoding="utf-8")
    return re.search(r'R"TEMPLATE\((.*)\)TEMPLATE"', header, re.S).group(1)


def call(name, arguments):
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


def calls(*tool_calls):
    return {"role": "assistant", "content": None, "tool_calls": list(tool_calls)}


def msg(role, content):
    return {"role": role, "content": content}


WEATHER = call("get_weather", '{"city": "Paris"}')
TIME = call("get_time", "{}")

# (name, messages, add_generation_prompt); an assistant message with
# content None and tool_calls is Tern's {"assistant", "", "", {calls}}.
CASES = [
    ("UserOnly", [msg("user", "Hi")], True),
    ("UserOnlyNoGenerationPrompt", [msg("user", "Hi")], False),
    ("Empty", [], True),
    ("MultiTurn", [msg("user", "What is 2 + 2?"), msg("assistant", "4."), msg("user", "And 3 + 3?")], True),
    ("EndsWithAssistant", [msg("user", "Hi"), msg("assistant", "Hello!")], False),
    ("EmptyAssistant", [msg("user", "Hi"), msg("assistant", ""), msg("user", "Hm?")], True),
    ("SystemFirst", [msg("system", "You are terse."), msg("user", "Hi")], True),
    ("SystemsJoinedAfterBos", [msg("system", "A."), msg("user", "Hi"), msg("assistant", "Yo"),
                               msg("system", "B.\nC."), msg("user", "Bye")], True),
    ("SystemOnly", [msg("system", "S")], True),
    ("Unicode", [msg("user", "Ça va? 東京 😀\n\nline"), msg("assistant", "Oui ✓")], True),
    ("ToolCallThenAnswer", [msg("user", "Weather in Paris?"), calls(WEATHER), msg("tool", '{"temp": 20}'),
                            msg("assistant", "It is 20 °C."), msg("user", "Thanks")], True),
    ("ToolOutputsEndTheConversation", [msg("user", "Weather and time?"), calls(WEATHER, TIME),
                                       msg("tool", "sunny"), msg("tool", "12:00")], True),
    ("ToolOutputsNoGenerationPrompt", [msg("user", "Weather?"), calls(WEATHER), msg("tool", "sunny")], False),
    ("SecondToolTurn", [msg("system", "Use tools."), msg("user", "Weather?"), calls(WEATHER), msg("tool", "sunny"),
                        msg("assistant", "Sunny."), msg("user", "Time?"), calls(TIME), msg("tool", "12:00"),
                        msg("assistant", "Noon.")], True),
    ("ThreeCallsInOneMessage", [msg("user", "x"), calls(WEATHER, TIME, call("f", '{"a": [1, 2]}'))], True),
    ("CallsBackToBack", [msg("user", "x"), calls(WEATHER), msg("tool", "1"), calls(TIME), msg("tool", "2"),
                         msg("assistant", "done")], True),
]

# R1's: reasoning in history is cut at the last </think> (Tern's messages
# carry it as `reasoning`, rendered by neither template), text beside calls.
R1_CASES = [
    ("ThinkStrippedFromHistory", [msg("user", "What is 2 + 2?"),
                                  msg("assistant", "<think>\nreasoning\n</think>\n\nanswer"),
                                  msg("user", "And 3 + 3?")], True),
    ("EndsWithThinkingAssistant", [msg("user", "Hi"), msg("assistant", "<think>\nr\n</think>\n\nanswer")],
     False),
    ("TextBesideTheFirstCall", [msg("user", "x"), dict(calls(WEATHER), content="Let me look."), msg("tool", "1")],
     True),
]


def cpp(s):
    out = '"'
    for ch in s:
        out += {"\\": "\\\\", '"': '\\"', "\n": "\\n"}.get(ch, ch)
    return out + '"'


def cpp_message(m):
    if m.get("tool_calls"):
        tool_calls = ", ".join(f"{{{cpp(c['function']['name'])}, {cpp(c['function']['arguments'])}}}"
                               for c in m["tool_calls"])
        return f"{{{cpp(m['role'])}, {cpp(m['content'] or '')}, \"\", {{{tool_calls}}}}}"
    return f"{{{cpp(m['role'])}, {cpp(m['content'])}}}"


# Where the expected text is broken into lines: after each of these.
BREAKS = ("<｜end▁of▁sentence｜>", "<｜tool▁outputs▁end｜>", "<｜tool▁call▁end｜>", "<｜tool▁output▁end｜>",
          "<｜tool▁calls▁begin｜>")


def main():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    template = env.from_string(template_text())
    for name, messages, generation_prompt in CASES + (R1_CASES if R1 else []):
        text = template.render(messages=messages, add_generation_prompt=generation_prompt,
                               bos_token="<｜begin▁of▁sentence｜>", eos_token="<｜end▁of▁sentence｜>")
        parts = re.split("|".join(f"(?<={re.escape(b)})" for b in BREAKS), text)
        print(f"    {{{cpp(name)},\n     {{{', '.join(cpp_message(m) for m in messages)}}},\n"
              f"     {'true' if generation_prompt else 'false'},\n     " +
              "\n     ".join(cpp(p) for p in parts if p) + "},")


if __name__ == "__main__":
    main()
