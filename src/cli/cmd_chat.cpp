// tern chat <model> [--prompt TEXT]: interactive chat with streamed output
// (/reset, /exit), or one shot with --prompt, in the model's chat format
// (Qwen3 ChatML, harmony for gpt-oss; see tern/runtime/chat_format.h).
//
// Every turn re-renders the whole conversation, as apply_chat_template
// would (earlier reasoning is dropped by both formats), and the session
// keeps the KV prefix that did not change (Session::keep_common_prefix).
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>

#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "tern/core/error.h"
#include "tern/runtime/chat_format.h"
#include "tern/runtime/trace_recorder.h"
#include "tern/tokenizer/stream_decoder.h"

namespace tern::cli {

namespace {

// How the reasoning part of a reply is shown.
enum class ReasoningDisplay {
  Raw,     // the reply's text exactly as generated, markup included (Qwen3's default)
  Hidden,  // not shown; "(thinking…)" while it runs, on a terminal (harmony's default)
  Shown,   // shown faint on a terminal, after a "[thinking] " prefix otherwise
};

struct ChatFlags {
  EngineFlags engine;
  SamplingFlags sampling;
  std::string prompt;
  std::string system;
  int64_t n = 1024;
  bool no_think = false;
  bool think = false;
  std::string reasoning_effort = "medium";
  std::string date;
  bool show_reasoning = false;
  bool hide_reasoning = false;
  std::string trace;  // routing trace file (docs/TRACES.md)
  // Developer flags (hidden from --help), for tests with random weights:
  std::string force_reply;  // use these tokens as the model's reply instead of sampling
  bool print_prompt = false;
};

constexpr const char* kFaint = "\x1b[2m";
constexpr const char* kNormal = "\x1b[0m";
constexpr const char* kEraseLine = "\r\x1b[K";

void write_out(std::string_view text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

// Writes a reply's parser events to stdout.
class ReplyPrinter {
 public:
  ReplyPrinter(ReasoningDisplay display, bool tty) : display_(display), tty_(tty) {}

  void event(const ChatEvent& e) {
    switch (e.kind) {
      case ChatEvent::Kind::Reasoning:
        if (display_ == ReasoningDisplay::Shown) {
          if (!in_reasoning_) write_out(tty_ ? kFaint : "[thinking] ");
          write_out(e.text);
          at_line_start_ = !e.text.empty() && e.text.back() == '\n';
        } else if (display_ == ReasoningDisplay::Hidden && tty_ && !in_reasoning_) {
          write_out(std::string(kFaint) + "(thinking…)" + kNormal);
        }
        in_reasoning_ = true;
        break;
      case ChatEvent::Kind::Content:
        end_reasoning();
        write_out(e.text);
        break;
      case ChatEvent::Kind::ToolCall:
        end_reasoning();
        write_out(fmt::format("[tool call] {}({})\n", e.name, e.text));
        break;
      case ChatEvent::Kind::End:
        end_reasoning();
        break;
    }
  }
  void end_reasoning() {
    if (!in_reasoning_) return;
    in_reasoning_ = false;
    if (display_ == ReasoningDisplay::Shown)
      write_out(std::string(tty_ ? kNormal : "") + (at_line_start_ ? "" : "\n"));
    if (display_ == ReasoningDisplay::Hidden && tty_) write_out(kEraseLine);
  }

 private:
  ReasoningDisplay display_;
  bool tty_;
  bool in_reasoning_ = false;
  bool at_line_start_ = false;  // the reasoning shown so far ends with a newline
};

class Chat {
 public:
  Chat(Engine& engine, const ChatFlags& f)
      : engine_(engine), f_(f), session_(engine),
        format_(make_chat_format(engine.config().architecture, engine.tokenizer(), engine.stop_tokens(),
                                engine.hf_chat_template())) {
    const bool harmony = format_->name() == "harmony";
    if (harmony && f.no_think) fail("--no-think is for Qwen3; gpt-oss always reasons (use --reasoning-effort low)");
    if (harmony && f.think) fail("--think is for Gemma 4; gpt-oss always reasons (use --reasoning-effort)");
    if (f.no_think && f.think) fail("--think and --no-think contradict each other");
    if (f.no_think) options_.enable_thinking = false;
    if (f.think) options_.enable_thinking = true;  // unset: the format's default
    options_.reasoning_effort = f.reasoning_effort;
    options_.date = f.date;
    display_ = f.show_reasoning   ? ReasoningDisplay::Shown
               : f.hide_reasoning ? ReasoningDisplay::Hidden
               : harmony          ? ReasoningDisplay::Hidden
                                  : ReasoningDisplay::Raw;
    if (!f.force_reply.empty()) forced_ = engine.tokenizer().encode(f.force_reply);
    if (!f.trace.empty()) {
      recorder_ = std::make_unique<TraceRecorder>(f.trace);
      recorder_->attach(session_);
    }
    reset();
  }

  // Flushes the routing trace, if one is recorded.
  void finish() {
    if (recorder_) recorder_->close();
  }

  bool harmony() const { return format_->name() == "harmony"; }

  void reset() {
    session_.reset();
    history_.clear();
    if (!f_.system.empty()) history_.push_back({"system", f_.system});
  }

  // One user message and the streamed reply. On an error the message is
  // taken back, so the conversation stays as it was.
  void turn(const std::string& user) {
    history_.push_back({"user", user});
    try {
      history_.push_back(reply());
    } catch (...) {
      history_.pop_back();
      throw;
    }
  }

 private:
  ChatMessage reply() {
    const std::string text = format_->render(history_, options_);
    if (f_.print_prompt) fmt::print(stderr, "[prompt]\n{}\n[/prompt]\n", text);
    const std::vector<int32_t> ids = engine_.tokenizer().encode(text);
    const int64_t kept = session_.keep_common_prefix(ids);
    auto fed = static_cast<size_t>(kept);
    // A model with sliding-window rings steps back only to a checkpoint: feed
    // up to where the next turn's prompt will part from this one and take it
    // there; where the whole prompt is shared (gpt-oss's "<|start|>assistant"),
    // generate() takes it after the prompt.
    bool whole_prompt = true;
    if (session_.kv().has_rings()) {
      const size_t shared = tokens_shared_with_next_turn(*format_, engine_.tokenizer(), history_, options_, ids);
      if (shared < ids.size()) whole_prompt = false;
      if (shared > fed && shared < ids.size()) {
        session_.feed(std::span<const int32_t>(ids).subspan(fed, shared - fed));
        session_.checkpoint();
        fed = shared;
      }
    }
    std::span<const int32_t> rest(ids.begin() + static_cast<std::ptrdiff_t>(fed), ids.end());

    GenerateOptions g;
    g.max_new_tokens = f_.n;
    g.sampling = f_.sampling.options(engine_.default_sampling());
    g.stop_tokens = format_->stop_tokens();
    g.checkpoint_prompt = whole_prompt;
    auto parser = format_->make_parser(options_);
    const bool tty = ::isatty(STDOUT_FILENO) != 0;
    ReplyPrinter printer(display_, tty);
    StreamDecoder raw(engine_.tokenizer());
    int64_t generated = 0;
    auto on_token = [&](int32_t id) {
      ++generated;
      if (display_ == ReasoningDisplay::Raw && std::find(g.stop_tokens.begin(), g.stop_tokens.end(), id) == g.stop_tokens.end())
        write_out(raw.push(id));
      for (const ChatEvent& e : parser->push(id))
        if (display_ != ReasoningDisplay::Raw) printer.event(e);
      return !parser->done();
    };

    GenerationStats stats;
    if (forced_.empty()) {
      generate(session_, rest, g, on_token, &stats);
    } else {  // prefill as usual, then feed the forced reply as if it had been sampled
      g.max_new_tokens = 0;
      generate(session_, rest, g, nullptr, &stats);
      for (int32_t id : forced_) {
        if (generated == f_.n) break;
        const bool more = on_token(id);
        if (!more || generated == f_.n) break;  // as generate(): a stop or the last token is not fed
        session_.feed(std::span<const int32_t>(&id, 1));
      }
      stats.generated_tokens = generated;
    }
    if (display_ == ReasoningDisplay::Raw) write_out(raw.flush());
    for (const ChatEvent& e : parser->finish())
      if (display_ != ReasoningDisplay::Raw) printer.event(e);
    printer.end_reasoning();
    write_out("\n");
    if (!parser->done()) fmt::print(stderr, "[reply cut at {} tokens]\n", generated);
    if (f_.engine.stats) {
      fmt::print(stderr, "{}\n", stats.summary());
      fmt::print(stderr, "context: {} tokens reused, {} prefilled, {} generated\n", kept,
                 ids.size() - static_cast<size_t>(kept), generated);
    }
    return parser->reply();
  }

  Engine& engine_;
  const ChatFlags& f_;
  Session session_;
  std::unique_ptr<ChatFormat> format_;
  ChatFormatOptions options_;
  ReasoningDisplay display_ = ReasoningDisplay::Raw;
  std::vector<int32_t> forced_;
  std::vector<ChatMessage> history_;
  std::unique_ptr<TraceRecorder> recorder_;
};

}  // namespace

void add_chat_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("chat", "Chat with a model (interactive, or one shot with --prompt)");
  auto f = std::make_shared<ChatFlags>();
  f->engine.add(cmd);
  f->sampling.add(cmd);
  cmd->add_option("-p,--prompt", f->prompt, "One-shot: answer this message and exit");
  cmd->add_option("--system", f->system, "System message (gpt-oss: the developer instructions)");
  cmd->add_option("-n,--max-tokens", f->n, "Maximum tokens per reply")->default_val(1024)->check(CLI::PositiveNumber);
  cmd->add_flag("--no-think", f->no_think, "Disable thinking (Qwen3: empty <think> block; GLM-4.5: /nothink)");
  cmd->add_flag("--think", f->think, "Enable thinking where it is off by default (Gemma 4: <|think|>)");
  cmd->add_option("--reasoning-effort", f->reasoning_effort, "gpt-oss reasoning effort: low | medium | high")
      ->default_val("medium")
      ->check(CLI::IsMember({"low", "medium", "high"}));
  cmd->add_option("--date", f->date, "gpt-oss: the date in the system message, YYYY-MM-DD (default: today)");
  auto* show = cmd->add_flag("--show-reasoning", f->show_reasoning,
                             "Show the reasoning (faint on a terminal); default: hidden for gpt-oss, raw for Qwen3");
  auto* hide = cmd->add_flag("--hide-reasoning", f->hide_reasoning, "Do not show the reasoning");
  show->excludes(hide);
  hide->excludes(show);
  cmd->add_option("--force-reply", f->force_reply, "Tests: use this text's tokens as every reply")->group("");
  cmd->add_flag("--print-prompt", f->print_prompt, "Tests: print each rendered prompt to stderr")->group("");
  cmd->add_option("--trace", f->trace, "Write the routing of every token run to FILE (JSON Lines, docs/TRACES.md)");
  cmd->callback([f, cmd] {
    Engine engine(f->engine.options());
    engine.tokenizer();  // a clear error now if the model has none
    Chat chat(engine, *f);
    if (cmd->count("--reasoning-effort") && !chat.harmony())
      fail("--reasoning-effort is for gpt-oss (harmony); for Qwen3 use --no-think");
    if (!f->prompt.empty()) {
      chat.turn(f->prompt);
      chat.finish();
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
        chat.reset();
        fmt::print(stderr, "[conversation cleared]\n");
        continue;
      }
      if (line.empty()) continue;
      try {
        chat.turn(line);
      } catch (const Error& e) {
        fmt::print(stderr, "error: {}\n", e.what());
        fmt::print(stderr, "[use /reset to start over]\n");
      }
    }
    chat.finish();
  });
}

}  // namespace tern::cli
