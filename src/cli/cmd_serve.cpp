// tern serve <model> [--host 127.0.0.1] [--port 8080] [--api-key KEY] [--parallel N]:
// the OpenAI-compatible server and the dashboard (tern/server/http_server.h).
#include <fmt/format.h>
#include <pthread.h>

#include <csignal>
#include <cstdio>
#include <thread>

#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "tern/core/error.h"
#include "tern/core/units.h"
#include "tern/server/http_server.h"

namespace tern::cli {

namespace {

std::string default_model_id(const std::string& path) {
  std::string name = std::filesystem::path(path).lexically_normal().filename().string();
  if (name.empty()) name = std::filesystem::path(path).lexically_normal().parent_path().filename().string();
  if (name.ends_with(".tern")) name.resize(name.size() - 5);
  return name.empty() ? "tern" : name;
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("serve", "Serve the OpenAI API and the dashboard over HTTP");
  struct Flags {
    EngineFlags engine;
    ServerOptions server;
    std::string max_body = "8M";
  };
  auto f = std::make_shared<Flags>();
  f->engine.add(cmd);
  cmd->add_option("--host", f->server.host, "Address to listen on (default 127.0.0.1; another needs --api-key)")
      ->default_val("127.0.0.1");
  cmd->add_option("--port", f->server.port, "Port (0 = any free one; the chosen port is printed)")
      ->default_val(8080)
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--api-key", f->server.api_key, "Require 'Authorization: Bearer KEY' on the API");
  cmd->add_option("--parallel", f->server.parallel, "Requests decoded together as one batch (each holds a KV cache)")
      ->default_val(1)
      ->check(CLI::Range(1, 256));
  cmd->add_option("--max-queue", f->server.max_queue, "Requests waiting beyond --parallel; more get 429")
      ->default_val(16)
      ->check(CLI::Range(0, 100000));
  cmd->add_option("--max-body", f->max_body, "Largest request body (default 8M)");
  cmd->add_option("--kv-dir", f->server.kv_dir,
                  "Save kept sessions' KV here at exit and restore them at start (multi-turn chats survive a restart)");
  cmd->add_option("--force-reply", f->server.force_reply, "Tests: every reply is this text's tokens")->group("");
  cmd->add_flag("--print-prompt", f->server.print_prompt, "Tests: print each rendered chat prompt to stderr")->group("");
  cmd->add_option("--alias", f->server.model_id, "Model name in /v1/models and requests (default: the directory name)");
  cmd->callback([f] {
    // Signals go to one waiting thread, so a Ctrl-C stops the server
    // cleanly (requests cancelled, usage counts saved); threads started
    // from here on inherit the mask.
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
    std::signal(SIGPIPE, SIG_IGN);  // a client that left is a failed write, not a dead server

    ServerOptions so = f->server;
    so.max_body_bytes = parse_size(f->max_body);
    if (so.model_id.empty()) so.model_id = default_model_id(f->engine.model);
    Engine engine(f->engine.options());
    engine.tokenizer();  // a clear error now if the model has none
    HttpServer server(engine, so);
    const int port = server.bind();
    std::thread waiter([&] {
      int sig = 0;
      sigwait(&signals, &sig);
      server.stop();
    });
    const std::string host = so.host.find(':') != std::string::npos ? "[" + so.host + "]" : so.host;
    fmt::print(stderr, "tern serve: {} ({}), {}\n", so.model_id, engine.config().architecture, engine.memory_plan());
    fmt::print(stderr, "listening on http://{}:{} (OpenAI API at /v1, dashboard at /); {} request(s) at a time\n", host,
               port, so.parallel);
    std::fflush(stderr);
    server.run();
    // Wake the waiter if the server stopped for another reason.
    pthread_kill(waiter.native_handle(), SIGTERM);
    waiter.join();
    fmt::print(stderr, "tern serve: stopped\n");
  });
}

}  // namespace tern::cli
