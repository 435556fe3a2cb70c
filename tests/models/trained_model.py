"""The trained tiny Qwen3-MoE test model: where it lives and what it was taught.

Random-weight models are near-ties at most steps (any rounding flips their
greedy choice), so tests that need a *decisive* model use a `tern synth
--preset tiny --dtype f32` checkpoint trained by tools/train_tiny_moe.py on a
toy language (arithmetic progressions that need attention to the previous
token, and a random permutation walk the experts memorise).

The trained checkpoint is committed as a fixture (tests/fixtures/trained-tiny-moe,
1.2 MiB; its README gives the command that made it), so the tests that use it
see the same bytes on every machine. Training itself depends on the CPU's BLAS
kernels (PyTorch + OpenBLAS), so a re-trained model differs in its bits from
machine to machine: test_trainer_reproduces_quality.py checks that the script
still makes a model of the same *quality*, never the same bytes.
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cli"))
from tern_cli import SOURCE_DIR, run  # noqa: E402

PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
FIXTURE = os.path.join(SOURCE_DIR, "tests", "fixtures", "trained-tiny-moe")
TRAINER = os.path.join(SOURCE_DIR, "tools", "train_tiny_moe.py")
# The command that made the fixture (tests/fixtures/trained-tiny-moe/README.md).
SYNTH_ARGS = ["synth", "--preset", "tiny", "--dtype", "f32", "--seed", "3"]
TRAIN_ARGS = ["--steps", "600", "--lr", "1e-2", "--threads", "1", "--seed", "0", "--check"]


def train_fresh(work: str) -> str:
    """Synthesizes the tiny model and trains it as the fixture was trained.

    The result is cached under .cache/trained/ keyed by the synthesized bytes
    and both scripts (the ASan run of the suite reuses the release run's)."""
    hf = os.path.join(work, "synth")
    run(*SYNTH_ARGS, "-o", hf, "-q")
    key = hashlib.sha256()
    for path in (os.path.join(hf, "model.safetensors"), os.path.join(hf, "config.json"), TRAINER,
                 os.path.join(SOURCE_DIR, "tools", "reference", "qwen3_moe.py")):
        with open(path, "rb") as f:
            key.update(f.read())
    key.update(" ".join(TRAIN_ARGS).encode())
    cache = os.path.join(SOURCE_DIR, ".cache", "trained", key.hexdigest()[:16])
    if not os.path.exists(os.path.join(cache, "training.json")):
        p = subprocess.run([PYTHON, TRAINER, hf, *TRAIN_ARGS], capture_output=True, text=True, timeout=1800)
        if p.returncode != 0:
            raise AssertionError(f"training failed ({p.returncode}); PyTorch comes from Debian's python3-torch "
                                 f"(scripts/install-deps.sh):\n{p.stdout}\n{p.stderr}")
        os.makedirs(os.path.dirname(cache), exist_ok=True)
        staging = tempfile.mkdtemp(dir=os.path.dirname(cache))
        shutil.copytree(hf, os.path.join(staging, "m"))
        try:
            os.rename(os.path.join(staging, "m"), cache)
        except OSError:  # another run finished first: same inputs, use it
            pass
        shutil.rmtree(staging, ignore_errors=True)
    return cache


def training_report(model_dir: str) -> dict:
    with open(os.path.join(model_dir, "training.json")) as f:
        return json.load(f)


def language_prompts(training: dict):
    """Prompts of the toy language and their true 32-token continuations."""
    lang = training["language"]
    base_p, base_w, perm = lang["progression_base"], lang["walk_base"], lang["walk_permutation"]
    prompts, expected = [], []
    for a0, s, n in [(17, 3, 6), (250, 7, 4), (0, 1, 3), (99, 5, 9), (128, 2, 12)]:
        seq = [base_p + (a0 + i * s) % 256 for i in range(n + 32)]
        prompts.append(seq[:n])
        expected.append(seq[n:])
    for a0, n in [(3, 2), (200, 5), (77, 1)]:
        seq = [base_w + a0]
        while len(seq) < n + 32:
            seq.append(base_w + perm[seq[-1] - base_w])
        prompts.append(seq[:n])
        expected.append(seq[n:])
    return prompts, expected


def greedy(model: str, prompt, n=32):
    return json.loads(run("generate", model, "--tokens", ",".join(map(str, prompt)), "-n", str(n), "--greedy",
                          "--ignore-eos", "--json").stdout)["tokens"]
