// tern chat <model> [--prompt TEXT]: interactive chat with streamed output
// (/reset, /exit), or one shot with --prompt. Uses the model's chat format.
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "tern/core/error.h"
#include "tern/runtime/chat_template.h"
#include "tern/tokenizer/stream_decoder.h"

namespace tern::cli {

namespace {

struct ChatFlags {
  EngineFlags engine;
  SamplingFlags sampling;
  std::string prompt;
  std::string system;
  int64_t n = 1024;
  bool no_think = false;
};

// Runs one assistant turn: feeds `text` (already in chat format) and streams
// the reply to stdout. Returns false if the context is full.
void assistant_turn(Engine& engine, Session& session, const std::string& text, const ChatFlags& f) {
  std::vector<int32_t> ids = engine.tokenizer().encode(text);
  GenerateOptions g;
  g.max_new_tokens = f.n;
  g.sampling = f.sampling.options(engine.default_sampling());
  g.stop_tokens = engine.stop_tokens();
  StreamDecoder stream(engine.tokenizer());
  GenerationStats stats;
  auto out = generate(session, ids, g, [&](int32_t id) {
    if (std::find(g.stop_tokens.begin(), g.stop_tokens.end(), id) != g.stop_tokens.end()) return true;
    std::string piece = stream.push(id);
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
    return true;
  }, &stats);
  std::string rest = stream.flush();
  std::fwrite(rest.data(), 1, rest.size(), stdout);
  std::fputc('\n', stdout);
  // The turn's end marker goes into the context so the next turn continues it.
  if (out.empty() || std::find(g.stop_tokens.begin(), g.stop_tokens.end(), out.back()) == g.stop_tokens.end())
    fmt::print(stderr, "[reply cut at {} tokens]\n", out.size());
  else
    session.feed(std::span<const int32_t>(&out.back(), 1));
  if (f.engine.stats) fmt::print(stderr, "{}\n", stats.summary());
}

}  // namespace

void add_chat_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("chat", "Chat with a model (interactive, or one shot with --prompt)");
  auto f = std::make_shared<ChatFlags>();
  f->engine.add(cmd);
  f->sampling.add(cmd);
  cmd->add_option("-p,--prompt", f->prompt, "One-shot: answer this message and exit");
  cmd->add_option("--system", f->system, "System message");
  cmd->add_option("-n,--max-tokens", f->n, "Maximum tokens per reply")->default_val(1024)->check(CLI::PositiveNumber);
  cmd->add_flag("--no-think", f->no_think, "Disable Qwen3 thinking (empty <think> block)");
  cmd->callback([f] {
    Engine engine(f->engine.options());
    engine.tokenizer();  // a clear error now if the model has none
    Session session(engine);
    ChatFormatOptions fmt_opts{true, !f->no_think};
    auto first_turn = [&](const std::string& user) {
      std::vector<ChatMessage> msgs;
      if (!f->system.empty()) msgs.push_back({"system", f->system});
      msgs.push_back({"user", user});
      return render_chatml(msgs, fmt_opts);
    };
    if (!f->prompt.empty()) {
      assistant_turn(engine, session, first_turn(f->prompt), *f);
      return;
    }
    const bool tty = ::isatty(STDIN_FILENO) != 0;
    if (tty) fmt::print(stderr, "tern chat — /reset clears the conversation, /exit quits\n");
    std::string line;
    while (true) {
      if (tty) fmt::print(stderr, "> ");
      if (!std::getline(std::cin, line)) break;
      if (line == "/exit" || line == "/quit") break;
      if (line == "/reset") {
        session.reset();
        fmt::print(stderr, "[conversation cleared]\n");
        continue;
      }
      if (line.empty()) continue;
      // Later turns append to the context (prefix reuse): "\n<|im_start|>user…".
      std::string text = session.position() == 0
                             ? first_turn(line)
                             : "\n" + render_chatml({{"user", line}}, fmt_opts);
      try {
        assistant_turn(engine, session, text, *f);
      } catch (const Error& e) {
        fmt::print(stderr, "error: {}\n", e.what());
        fmt::print(stderr, "[use /reset to start over]\n");
      }
    }
  });
}

}  // namespace tern::cli
