// tern generate <model> (--prompt TEXT | --tokens 1,2,3) [-n N] [--json] [--trace FILE]: raw completion.
#include <fmt/format.h>

#include <cstdio>

#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "tern/runtime/trace_recorder.h"
#include "tern/tokenizer/stream_decoder.h"

namespace tern::cli {

void add_generate_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("generate", "Complete a prompt (raw text, no chat template)");
  struct Flags {
    EngineFlags engine;
    SamplingFlags sampling;
    PromptFlags prompt;
    int64_t n = 128;
    bool json = false;
    bool ignore_eos = false;
    std::string trace;
  };
  auto f = std::make_shared<Flags>();
  f->engine.add(cmd);
  f->prompt.add(cmd);
  f->sampling.add(cmd);
  cmd->add_option("-n,--max-tokens", f->n, "Maximum new tokens")->default_val(128)->check(CLI::PositiveNumber);
  cmd->add_flag("--json", f->json, "Print {\"tokens\", \"text\", \"stats\"} as JSON");
  cmd->add_flag("--ignore-eos", f->ignore_eos, "Do not stop at end-of-sequence tokens");
  cmd->add_option("--trace", f->trace, "Write the routing of every token run to FILE (JSON Lines, docs/TRACES.md)");
  cmd->callback([f] {
    Engine engine(f->engine.options());
    Session session(engine);
    std::unique_ptr<TraceRecorder> recorder;
    if (!f->trace.empty()) {
      recorder = std::make_unique<TraceRecorder>(f->trace);
      recorder->attach(session);
    }
    std::vector<int32_t> prompt = f->prompt.ids(engine);
    GenerateOptions g;
    g.max_new_tokens = f->n;
    g.sampling = f->sampling.options(engine.default_sampling());
    if (!f->ignore_eos) g.stop_tokens = engine.stop_tokens();
    std::unique_ptr<StreamDecoder> stream;
    // The completion continues the prompt: its first token keeps its leading space.
    if (!f->json && engine.has_tokenizer()) stream = std::make_unique<StreamDecoder>(engine.tokenizer(), true);
    GenerationStats stats;
    auto out = generate(session, prompt, g, [&](int32_t id) {
      if (stream) {
        std::string piece = stream->push(id);
        std::fwrite(piece.data(), 1, piece.size(), stdout);
        std::fflush(stdout);
      } else if (!f->json) {
        fmt::print("{} ", id);
        std::fflush(stdout);
      }
      return true;
    }, &stats);
    if (recorder) recorder->close();
    if (f->json) {
      nlohmann::json j = {{"prompt_tokens", prompt}, {"tokens", out}, {"stats", stats.to_json()}};
      std::string text;
      if (engine.has_tokenizer()) {  // as streamed: the completion continues the prompt
        StreamDecoder whole(engine.tokenizer(), true);
        for (int32_t id : out) text += whole.push(id);
        text += whole.flush();
      }
      j["text"] = text;
      fmt::print("{}\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    } else {
      if (stream) {
        std::string rest = stream->flush();
        std::fwrite(rest.data(), 1, rest.size(), stdout);
      }
      std::fputc('\n', stdout);
    }
    std::fflush(stdout);  // the text before the statistics (stderr) also when stdout is a pipe
    if (f->engine.stats) fmt::print(stderr, "{}\n", stats.summary());
  });
}

}  // namespace tern::cli
