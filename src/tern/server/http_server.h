#pragma once
// The OpenAI-compatible HTTP server (`tern serve`), on cpp-httplib:
//   POST /v1/chat/completions, POST /v1/completions (JSON or Server-Sent Events)
//   GET  /v1/models, GET /health, GET /metrics (Prometheus text)
//   GET  /  the dashboard; GET /api/state, GET /api/events (its live SSE feed)
// Requests decode together through the Scheduler; every error is an
// OpenAI-style JSON error object with the matching status.
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "tern/runtime/engine.h"

namespace tern {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;               // 0 = any free port (printed at start)
  std::string api_key;           // empty = no authentication (loopback only)
  int parallel = 1;              // requests decoded together
  int max_queue = 16;            // requests waiting beyond those; then 429
  size_t max_body_bytes = 8u << 20;
  std::string model_id;          // the name /v1/models lists and requests must use
  // Kept sessions are saved here at exit and restored at start when they
  // are for this model and --ctx (a corrupt or foreign file: a warning).
  std::filesystem::path kv_dir;
  // Tests only, for a model with random weights: every reply is this text's
  // tokens (fed as if sampled), and each rendered prompt goes to stderr.
  std::string force_reply;
  bool print_prompt = false;
};

// Whether `host` is a loopback address (127.0.0.0/8, ::1, localhost).
bool is_loopback_host(const std::string& host);

class HttpServer {
 public:
  // Refuses (tern::Error) a non-loopback host without an API key.
  HttpServer(Engine& engine, ServerOptions options);
  ~HttpServer();
  // Binds; returns the port (the chosen one when options.port is 0).
  int bind();
  // Serves until stop(); call bind() first.
  void run();
  // Safe from any thread (e.g. a signal-waiting one).
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tern
