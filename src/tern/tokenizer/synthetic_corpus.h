#pragma once
// The training text for the synthetic tokenizer: a few KB of English prose,
// code and other scripts, written for Tern. Its merges only need to be
// plausible (common words and code fragments become single tokens), not good.
// Changing this text changes every synthetic model's vocabulary.
#include <string_view>

namespace tern {

inline constexpr std::string_view kSyntheticTokenizerCorpus = R"CORPUS(
The quick brown fox jumps over the lazy dog. The dog was not amused, and the fox ran into the forest.
A mixture of experts model routes every token to a small number of experts in each layer. The router
is a linear layer followed by a softmax; the top experts are chosen and their outputs are added together,
weighted by the router's probabilities. Because only a few experts are active for each token, the model
can be very large while the compute per token stays small. The rest of the model, the trunk, is always used:
attention, the norms, the embeddings and the output head. When the experts do not fit in memory, they can be
read from the disk when they are needed, and the ones that are used often can be kept in a cache.
It's a simple idea, but it's not easy to make it fast. We'll measure everything: the time to read each expert,
the time spent waiting for the disk, and the time spent computing. They're all printed at the end of the run.
I'd like to know how many tokens per second we get, and what the bound is. You've seen the numbers before.
Hello, world! How are you today? I am fine, thank you. What time is it? It is ten past three in the afternoon.
Numbers: 0 1 2 3 4 5 6 7 8 9 10 11 12 42 100 256 1024 4096 65536 3.14159 2.71828 1e-5 -17 +23 99.9% $120.50
Dates and times: 2024-01-15, 12:30:45, March 3rd, the 21st century, version 1.2.3, build #456.
In the beginning the model knows nothing; after training, it predicts the next token well enough to write.
People often ask whether a smaller model with more training is better than a larger model with less training.
The answer depends on the data, the compute budget, and what the model will be used for after training.

def tokenize(text, vocab, merges):
    """Split text into tokens using byte pair encoding."""
    words = [list(word.encode("utf-8")) for word in text.split()]
    for left, right in merges:
        for word in words:
            i = 0
            while i < len(word) - 1:
                if word[i] == left and word[i + 1] == right:
                    word[i:i + 2] = [vocab[(left, right)]]
                i += 1
    return [token for word in words for token in word]

class ExpertCache:
    def __init__(self, capacity):
        self.capacity = capacity
        self.entries = {}

    def get(self, layer, expert):
        key = (layer, expert)
        if key in self.entries:
            return self.entries[key]
        return None

#include <cstdint>
#include <vector>

namespace tern {

// Returns the index of the largest value.
int32_t argmax(const std::vector<float>& values) {
  int32_t best = 0;
  for (int32_t i = 1; i < static_cast<int32_t>(values.size()); ++i) {
    if (values[i] > values[best]) best = i;
  }
  return best;
}

struct Config {
  int32_t hidden_size = 2048;
  int32_t num_experts = 128;
  int32_t num_experts_per_tok = 8;
  float rms_norm_eps = 1e-6f;
};

}  // namespace tern

for (let i = 0; i < items.length; i++) {
  const item = items[i];
  if (item.value !== null && item.value !== undefined) {
    console.log(`item ${i}: ${item.value}`);
  }
}

SELECT name, count(*) FROM tokens WHERE length > 3 GROUP BY name ORDER BY count(*) DESC LIMIT 10;
{"model": "tern", "layers": 48, "experts": [1, 2, 3], "enabled": true, "ratio": 0.5}
<html><body><p class="note">Hello &amp; welcome</p></body></html>
$ cmake --build build --target tern && ./build/bin/tern --help | grep -i tokenize

Le renard brun rapide saute par-dessus le chien paresseux. C'est une phrase française, très utile à tester.
Der schnelle braune Fuchs springt über den faulen Hund. Größe, Straße, Übung, schön, Mädchen.
El rápido zorro marrón salta sobre el perro perezoso. ¿Dónde está la biblioteca? ¡Qué día tan bonito!
O rápido raposo marrom pula sobre o cão preguiçoso. Ação, coração, não, informação.
Быстрая коричневая лиса прыгает через ленивую собаку. Привет, как дела? Спасибо, хорошо.
Η γρήγορη καφέ αλεπού πηδά πάνω από τον τεμπέλη σκύλο. Καλημέρα!
快速的棕色狐狸跳过了懒狗。你好，世界！今天天气很好，我们去公园散步吧。机器学习和人工智能。
素早い茶色の狐がのろまな犬を飛び越える。こんにちは、世界！東京は日本の首都です。ありがとうございます。
빠른 갈색 여우가 게으른 개를 뛰어넘습니다. 안녕하세요, 세계! 감사합니다.
الثعلب البني السريع يقفز فوق الكلب الكسول. مرحبا بالعالم!
तेज़ भूरी लोमड़ी आलसी कुत्ते के ऊपर कूदती है। नमस्ते दुनिया!
Emoji: 😀 😂 🎉 👍 🚀 ❤️ 👨‍👩‍👧‍👦 🏳️‍🌈 🇯🇵 ✅ ⚠️ → ← ∑ ∫ √ ≤ ≥ ≠ ∞ π α β γ δ λ μ σ ω
Math: E = mc², a² + b² = c², f(x) = x³ − 2x + 1, ∀x ∈ ℝ: x² ≥ 0, lim_{n→∞} (1 + 1/n)^n = e.

The experts are stored on disk in a simple layout: each expert's weights are adjacent, so one read fetches
all of them. Every expert starts on a page boundary. The trunk is loaded once and stays in memory for the
whole session; the experts come and go. When the cache is full, the least recently used expert is evicted.
The prefetcher looks ahead: it runs the next layer's router early and starts reading the experts it predicts.
If the prediction is right, the read is already done when the expert is needed; if not, nothing is lost but
some bandwidth. The statistics are saved at the end, so the next run starts with a warm cache of hot experts.
Once upon a time there was a small program that wanted to read very large models. The models were too big
for the memory of the computer, so the program had to be clever. It kept the parts that every token needs in
memory, and it read the other parts from the disk only when they were needed. At first it was slow, because
the disk was slow and the program waited for every read. Then it learned to ask for the next parts early,
while it was still working on the current ones, and the waiting became shorter. Later it learned which parts
were popular and kept those close. In the end the program was not as fast as a computer with enough memory,
but it was much faster than anyone had expected, and it could run models that nobody else could run at home.
Questions and answers: What is a token? A token is a piece of text. What is an embedding? It is a vector
that represents a token. What is attention? It is the way the model looks at the other tokens in the context.
Why do we need a cache? Because reading from the disk is much slower than reading from memory. Which experts
should stay in the cache? The ones that will be used again soon; we cannot know that, so we guess from history.

import json
import os
from pathlib import Path


def load_config(path: Path) -> dict:
    with open(path, "r", encoding="utf-8") as f:
        config = json.load(f)
    if "num_experts" not in config:
        raise ValueError(f"{path}: missing num_experts")
    return config


def main() -> int:
    config = load_config(Path(os.environ.get("MODEL_DIR", ".")) / "config.json")
    print(f"experts: {config['num_experts']}, layers: {config['num_hidden_layers']}")
    for layer in range(config["num_hidden_layers"]):
        print(layer, end=" ")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

template <typename T>
class RingBuffer {
 public:
  explicit RingBuffer(size_t capacity) : data_(capacity) {}
  bool push(const T& value) {
    if (size_ == data_.size()) return false;
    data_[(head_ + size_) % data_.size()] = value;
    ++size_;
    return true;
  }
  std::optional<T> pop() {
    if (size_ == 0) return std::nullopt;
    T value = data_[head_];
    head_ = (head_ + 1) % data_.size();
    --size_;
    return value;
  }

 private:
  std::vector<T> data_;
  size_t head_ = 0;
  size_t size_ = 0;
};

Il était une fois un petit programme qui voulait lire de très grands modèles. La mémoire ne suffisait pas.
Es war einmal ein kleines Programm, das sehr große Modelle lesen wollte. Der Speicher war zu klein.
Había una vez un pequeño programa que quería leer modelos muy grandes. La memoria no era suficiente.
从前有一个小程序，它想读取非常大的模型。内存不够，所以它必须很聪明。它把常用的部分留在内存里。
昔々、とても大きなモデルを読みたい小さなプログラムがありました。メモリが足りませんでした。
Жила-была маленькая программа, которая хотела читать очень большие модели. Памяти не хватало.
User: Can you explain what a tokenizer does?
Assistant: A tokenizer turns text into a sequence of integers, called token ids, that the model can read.
It first splits the text into words and punctuation, then merges frequent byte pairs into larger tokens.
The same tokenizer turns the model's output ids back into text, one token at a time, as they are generated.
)CORPUS";

}  // namespace tern
