#include "tern/server/http_server.h"

#include <httplib.h>

#include <arpa/inet.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include <chrono>
#include <condition_variable>
#include <ctime>
#include <deque>
#include <mutex>

#include <fmt/format.h>

#include "tern/core/error.h"
#include "tern/core/json.h"
#include "tern/core/log.h"
#include "tern/core/memory.h"
#include "tern/runtime/chat_format.h"
#include "tern/server/dashboard_assets.h"
#include "tern/server/live_feed.h"
#include "tern/server/openai_api.h"
#include "tern/server/scheduler.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern {

using json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

bool is_loopback_host(const std::string& host) {
  if (host == "localhost" || host == "::1" || host == "[::1]") return true;
  in_addr a{};
  if (inet_pton(AF_INET, host.c_str(), &a) == 1) return (ntohl(a.s_addr) >> 24) == 127;
  return false;
}

namespace server_detail {

// One request's exchange between the scheduler thread (producer: deltas as
// tokens are sampled) and the HTTP thread (consumer: writes them out).
struct Exchange {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::string> chunks;  // stream: SSE lines ready to send
  bool done = false;
  RequestResult result;
  std::unique_ptr<ReplyAssembler> reply;
  std::vector<int32_t> tokens;  // every sampled id (a final stop token included), as generate() returns them
  int tool_calls_sent = 0;
  bool role_sent = false;
};

// JSON text; a string that is not UTF-8 (it cannot come from the decoder,
// which writes U+FFFD) would be replaced, not thrown.
std::string text(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string sse(const json& j) { return "data: " + text(j) + "\n\n"; }

std::string random_id(const char* prefix) {
  static std::atomic<uint64_t> counter{0};
  const uint64_t n = counter.fetch_add(1) + 1;
  const auto t = static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
  return fmt::format("{}{:x}{:04x}", prefix, t & 0xffffffffffull, n & 0xffff);
}

int64_t unix_time() { return static_cast<int64_t>(std::time(nullptr)); }

const char* status_text(int status) {
  switch (status) {
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 413: return "Payload Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return status >= 500 ? "Server Error" : "Client Error";
  }
}

}  // namespace server_detail

using namespace server_detail;

struct HttpServer::Impl {
  Engine& engine;
  ServerOptions opt;
  std::unique_ptr<ChatFormat> format;  // null without a tokenizer/chat format
  std::string format_error;
  std::unique_ptr<Scheduler> scheduler;
  LiveFeed feed;
  httplib::Server http;
  int64_t created = unix_time();
  std::atomic<uint64_t> http_requests{0}, http_errors{0};

  std::vector<int32_t> forced;

  Impl(Engine& e, ServerOptions o) : engine(e), opt(std::move(o)), feed(e) {
    if (!opt.force_reply.empty()) forced = engine.tokenizer().encode(opt.force_reply);
    try {
      format = make_chat_format(engine.config().architecture, engine.tokenizer(), engine.stop_tokens(),
                                engine.hf_chat_template());
    } catch (const Error& err) {
      format_error = err.what();  // /v1/completions still works with token ids or text
    }
    scheduler = std::make_unique<Scheduler>(engine, opt.parallel, opt.max_queue);
    restore_sessions();
    scheduler->set_step_observer([this](const ForwardTrace& t, int64_t rows) { feed.on_step(t, rows); });
    routes();
  }

  ~Impl() {
    http.stop();
    scheduler->stop();
    save_sessions();
  }

  std::filesystem::path session_path(size_t i) const { return opt.kv_dir / fmt::format("session-{}.tkv", i); }

  void restore_sessions() {
    if (opt.kv_dir.empty()) return;
    std::error_code ec;
    std::filesystem::create_directories(opt.kv_dir, ec);
    if (ec) fail("--kv-dir {}: {}", opt.kv_dir.string(), ec.message());
    const uint64_t fp = Session::fingerprint(engine);
    size_t restored = 0, tokens = 0;
    const auto sessions = scheduler->sessions();
    for (size_t i = 0; i < sessions.size(); ++i) {
      if (!std::filesystem::exists(session_path(i))) continue;
      try {
        sessions[i]->load(session_path(i), fp);
        ++restored;
        tokens += sessions[i]->tokens().size();
      } catch (const Error& e) {
        log(LogLevel::Warn, "ignoring a kept session: {}", e.what());
      }
    }
    if (restored) log(LogLevel::Info, "restored {} kept session(s), {} tokens of KV, from {}", restored, tokens, opt.kv_dir.string());
  }

  void save_sessions() {
    if (opt.kv_dir.empty()) return;
    const uint64_t fp = Session::fingerprint(engine);
    const auto sessions = scheduler->sessions();
    for (size_t i = 0; i < sessions.size(); ++i) {
      try {
        if (sessions[i]->tokens().empty()) std::filesystem::remove(session_path(i));
        else sessions[i]->save(session_path(i), fp);
      } catch (const std::exception& e) {
        log(LogLevel::Warn, "kept session {} not saved: {}", i, e.what());
      }
    }
  }

  static void send_error(httplib::Response& res, const ApiError& e) {
    res.status = e.status();
    res.set_content(text(e.body()), "application/json");
  }

  json parse_body(const httplib::Request& req) {
    // Any Content-Type: `curl -d` sends form-urlencoded, and the body is JSON either way.
    try {
      check_json_depth(req.body, "request body", 64);
      return json::parse(req.body);
    } catch (const json::exception& e) {
      throw ApiError(400, fmt::format("the request body is not valid JSON: {}", e.what()));
    } catch (const Error& e) {
      throw ApiError(400, e.what());
    }
  }

  void check_model(const CompletionRequest& r) {
    if (!r.model.empty() && r.model != opt.model_id)
      throw ApiError(404, fmt::format("The model '{}' does not exist; this server serves '{}'", r.model, opt.model_id),
                     "invalid_request_error", "model", "model_not_found");
  }

  int listen_fd = -1;

  void routes() {
    // httplib's default listening socket sets SO_REUSEPORT, which lets a
    // second server bind the same port and silently take half its
    // connections: SO_REUSEADDR only, so a port in use is an error. The fd
    // is kept to raise the listen backlog after bind (below).
    http.set_socket_options([this](socket_t sock) {
      int yes = 1;
      setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
      listen_fd = sock;
    });
    http.set_payload_max_length(opt.max_body_bytes);
    // Handler threads: one per running or queued request, plus room for
    // /health, /metrics, the dashboard's feed and refusals; connections
    // beyond them wait, accepted, for a free thread.
    const size_t threads = static_cast<size_t>(opt.parallel + opt.max_queue) + 64;
    http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      ++http_requests;
      if (opt.api_key.empty() || req.path == "/health" || req.path == "/" || req.path == "/favicon.ico")
        return httplib::Server::HandlerResponse::Unhandled;
      const std::string auth = req.get_header_value("Authorization");
      // The dashboard's EventSource cannot set headers: it passes the key as ?key=.
      const bool ok = auth == "Bearer " + opt.api_key ||
                      (req.path.starts_with("/api/") && req.get_param_value("key") == opt.api_key);
      if (ok) return httplib::Server::HandlerResponse::Unhandled;
      send_error(res, ApiError(401, auth.empty() ? "Missing API key: send 'Authorization: Bearer KEY'" : "Invalid API key",
                               "invalid_request_error", {}, "invalid_api_key"));
      res.set_header("WWW-Authenticate", "Bearer");
      return httplib::Server::HandlerResponse::Handled;
    });
    http.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
      ++http_errors;
      if (!res.body.empty()) return;
      std::string message = fmt::format("{} {}: {}", req.method, req.path, status_text(res.status));
      if (res.status == 404) message = fmt::format("Unknown endpoint {} {}", req.method, req.path);
      if (res.status == 413) message = fmt::format("The request body exceeds {} bytes", opt.max_body_bytes);
      res.set_content(text(error_body(message, res.status >= 500 ? "server_error" : "invalid_request_error")),
                      "application/json");
    });
    http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
      std::string what = "internal error";
      try {
        std::rethrow_exception(ep);
      } catch (const ApiError& e) {
        send_error(res, e);
        return;
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      res.status = 500;
      res.set_content(text(error_body(what, "server_error")), "application/json");
    });

    http.Get("/health", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(R"({"status":"ok"})", "application/json");
    });
    http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
      json j = {{"object", "list"},
                {"data", json::array({{{"id", opt.model_id},
                                       {"object", "model"},
                                       {"created", created},
                                       {"owned_by", "tern"},
                                       {"meta",
                                        {{"architecture", engine.config().architecture},
                                         {"context_length", engine.context()},
                                         {"chat_format", format ? std::string(format->name()) : std::string()}}}}})}};
      res.set_content(text(j), "application/json");
    });
    http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(metrics_text(), "text/plain; version=0.0.4");
    });
    http.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
      if (!format) throw ApiError(400, fmt::format("this model has no chat format ({}); use /v1/completions", format_error));
      CompletionRequest r = parse_chat_request(parse_body(req), engine.default_sampling());
      check_model(r);
      // OpenAI's newer clients send the system prompt as "developer"; ChatML has only "system".
      if (format->name() == "qwen3-chatml")
        for (ChatMessage& m : r.messages)
          if (m.role == "developer") m.role = "system";
      std::string prompt_text;
      try {
        prompt_text = format->render(r.messages, r.format);
      } catch (const Error& e) {
        throw ApiError(400, e.what(), "invalid_request_error", "messages");
      }
      if (opt.print_prompt) {
        fmt::print(stderr, "[prompt]\n{}\n[/prompt]\n", prompt_text);
        std::fflush(stderr);
      }
      std::vector<int32_t> ids = engine.tokenizer().encode(prompt_text);
      int64_t shared = -1;  // where the ring checkpoint goes; after the prompt if the probe cannot be rendered
      try {
        shared = static_cast<int64_t>(tokens_shared_with_next_turn(*format, engine.tokenizer(), r.messages, r.format, ids));
      } catch (const Error&) {
      }
      serve(std::move(r), std::move(ids), res, shared);
    });
    http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      CompletionRequest r = parse_completion_request(parse_body(req), engine.default_sampling());
      check_model(r);
      std::vector<int32_t> ids = r.prompt_tokens;
      if (ids.empty()) {  // text starts as the tokenizer's post-processor starts it (Mixtral's <s>)
        EncodeOptions options;
        options.add_bos = engine.tokenizer().post_processor_adds_bos();
        ids = engine.tokenizer().encode(r.prompt, options);
      }
      for (int32_t id : ids)
        if (id >= engine.config().vocab_size)
          throw ApiError(400, fmt::format("token id {} is outside the vocabulary ({} tokens)", id, engine.config().vocab_size),
                         "invalid_request_error", "prompt");
      serve(std::move(r), std::move(ids), res);
    });

    // The dashboard and its feed.
    http.Get("/", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(std::string(dashboard_html()), "text/html; charset=utf-8");
    });
    http.Get("/favicon.ico", [](const httplib::Request&, httplib::Response& res) { res.status = 204; });
    http.Get("/api/state", [this](const httplib::Request&, httplib::Response& res) {
      json st = feed.state();
      st["model"] = opt.model_id;
      res.set_content(text(st), "application/json");
    });
    http.Get("/api/events", [this](const httplib::Request&, httplib::Response& res) {
      auto cursor = std::make_shared<LiveFeed::Cursor>(feed.cursor());
      res.set_header("Cache-Control", "no-cache");
      res.set_chunked_content_provider("text/event-stream", [this, cursor](size_t, httplib::DataSink& sink) {
        const json event = feed.next(*cursor, metrics_json(), std::chrono::milliseconds(250));
        if (!opt_running) {
          sink.done();
          return true;
        }
        if (event.is_null()) return true;  // nothing new: wait again (an event goes out every 2 s regardless)
        const std::string line = sse(event);
        return sink.write(line.data(), line.size());
      });
    });
  }

  std::atomic<bool> opt_running{true};

  // Runs a parsed request through the scheduler and writes the response.
  // checkpoint_at: GenerationRequest::checkpoint_at.
  void serve(CompletionRequest r, std::vector<int32_t> prompt, httplib::Response& res, int64_t checkpoint_at = -1) {
    const int64_t ctx = engine.context();
    if (static_cast<int64_t>(prompt.size()) >= ctx)
      throw ApiError(400,
                     fmt::format("This model's context is {} tokens; the prompt has {} (and at least one token must be "
                                 "generated). Shorten the messages or restart the server with a larger --ctx.",
                                 ctx, prompt.size()),
                     "invalid_request_error", r.chat ? "messages" : "prompt", "context_length_exceeded");
    const int64_t room = ctx - static_cast<int64_t>(prompt.size());
    auto ex = std::make_shared<Exchange>();
    const std::vector<int32_t> stops =
        r.chat ? format->stop_tokens() : (r.ignore_eos ? std::vector<int32_t>{} : engine.stop_tokens());
    ex->reply = std::make_unique<ReplyAssembler>(engine.tokenizer(), r.chat ? format.get() : nullptr, r.format, r.stop, stops);
    auto g = std::make_shared<GenerationRequest>();
    g->prompt = std::move(prompt);
    g->max_tokens = std::min(r.max_tokens.value_or(room), room);
    g->sampling = r.sampling;
    g->stop_tokens = stops;
    g->forced_reply = forced;
    g->reuse_prefix = r.cache_prompt;
    g->checkpoint_at = checkpoint_at;
    const std::string id = random_id(r.chat ? "chatcmpl-" : "cmpl-");
    const int64_t created_at = unix_time();
    const std::string object = r.chat ? "chat.completion.chunk" : "text_completion";
    const bool stream = r.stream, chat = r.chat, include_usage = r.include_usage, return_tokens = r.return_tokens;
    const std::string echo = r.echo ? r.prompt : std::string();
    std::string model_id = opt.model_id;

    auto chunk = [=](json choice) {
      return json{{"id", id}, {"object", object}, {"created", created_at}, {"model", model_id},
                  {"choices", json::array({std::move(choice)})}};
    };
    // Stream lines for new deltas (under ex->mu).
    auto stream_deltas = [=](Exchange& x, std::vector<ReplyDelta>& deltas) {
      for (ReplyDelta& d : deltas) {
        if (!chat) {
          if (!d.content.empty())
            x.chunks.push_back(sse(chunk({{"index", 0}, {"text", d.content}, {"logprobs", nullptr}, {"finish_reason", nullptr}})));
          continue;
        }
        json delta = json::object();
        if (!x.role_sent) {
          delta["role"] = "assistant";
          x.role_sent = true;
        }
        if (!d.reasoning.empty()) delta["reasoning_content"] = d.reasoning;
        if (!d.content.empty()) delta["content"] = d.content;
        if (d.tool_call)
          delta["tool_calls"] = json::array({{{"index", x.tool_calls_sent++},
                                              {"id", random_id("call_")},
                                              {"type", "function"},
                                              {"function", {{"name", d.tool_call->name}, {"arguments", d.tool_call->arguments}}}}});
        if (!delta.empty())
          x.chunks.push_back(sse(chunk({{"index", 0}, {"delta", delta}, {"logprobs", nullptr}, {"finish_reason", nullptr}})));
      }
      deltas.clear();
    };
    std::weak_ptr<Exchange> weak = ex;
    g->on_token = [weak, stream, stream_deltas](int32_t token) {
      auto x = weak.lock();
      if (!x) return false;
      std::vector<ReplyDelta> deltas;
      std::lock_guard lock(x->mu);
      x->tokens.push_back(token);
      const bool more = x->reply->push(token, deltas);
      if (stream && !deltas.empty()) {
        stream_deltas(*x, deltas);
        x->cv.notify_all();
      }
      return more;
    };
    g->on_done = [weak, stream, stream_deltas](const RequestResult& result) {
      auto x = weak.lock();
      if (!x) return;
      std::vector<ReplyDelta> deltas;
      std::lock_guard lock(x->mu);
      x->reply->finish(deltas);
      if (stream) stream_deltas(*x, deltas);
      x->result = result;
      x->done = true;
      x->cv.notify_all();
    };
    if (stream && chat) {  // the first chunk carries the role, as OpenAI's does
      ex->chunks.push_back(sse(chunk({{"index", 0}, {"delta", {{"role", "assistant"}, {"content", ""}}}, {"logprobs", nullptr}, {"finish_reason", nullptr}})));
      ex->role_sent = true;
    }
    if (stream && !chat && !echo.empty())
      ex->chunks.push_back(sse(chunk({{"index", 0}, {"text", echo}, {"logprobs", nullptr}, {"finish_reason", nullptr}})));

    std::shared_ptr<GenerationRequest> handle = g;
    if (!scheduler->submit(g)) {
      res.set_header("Retry-After", std::to_string(scheduler->retry_after_seconds()));
      throw ApiError(429, fmt::format("The server is busy: {} requests running and {} queued (its limit); retry later",
                                      opt.parallel, opt.max_queue),
                     "requests", {}, "rate_limit_exceeded");
    }

    auto usage = [](const RequestResult& rr) {
      json u = {{"prompt_tokens", rr.prompt_tokens},
                {"completion_tokens", rr.completion_tokens},
                {"total_tokens", rr.prompt_tokens + rr.completion_tokens},
                {"prompt_tokens_details", {{"cached_tokens", rr.cached_tokens}}}};
      return u;
    };
    auto timings = [](const RequestResult& rr) {
      return json{{"queue_seconds", rr.queue_seconds},
                  {"time_to_first_token", rr.time_to_first_token},
                  {"decode_seconds", rr.decode_seconds},
                  {"decode_tokens_per_second",
                   rr.decode_seconds > 0 && rr.completion_tokens > 1 ? (rr.completion_tokens - 1) / rr.decode_seconds : 0.0},
                  {"expert_cache_lookups", rr.cache_lookups},
                  {"expert_cache_hits", rr.cache_hits},
                  {"expert_bytes_read", rr.bytes_read}};
    };
    auto error_of = [](const RequestResult& rr) {
      return ApiError(500, fmt::format("generation failed: {}", rr.error), "server_error");
    };
    auto finish_reason = [](Exchange& x) {
      return finish_reason_name(x.result.cause == FinishCause::Length, !x.reply->tool_calls().empty());
    };

    if (stream) {
      res.set_header("Cache-Control", "no-cache");
      res.set_header("X-Accel-Buffering", "no");
      res.set_chunked_content_provider(
          "text/event-stream",
          [=, this](size_t, httplib::DataSink& sink) {
            std::unique_lock lock(ex->mu);
            ex->cv.wait_for(lock, std::chrono::seconds(10), [&] { return ex->done || !ex->chunks.empty(); });
            std::string out;
            while (!ex->chunks.empty()) {
              out += ex->chunks.front();
              ex->chunks.pop_front();
            }
            const bool done = ex->done;
            if (done) {
              const RequestResult& rr = ex->result;
              if (rr.cause == FinishCause::Error) {
                out += sse(error_of(rr).body());
              } else if (rr.cause != FinishCause::Cancelled) {
                json last = chat ? json{{"index", 0}, {"delta", json::object()}, {"logprobs", nullptr}, {"finish_reason", finish_reason(*ex)}}
                                 : json{{"index", 0}, {"text", ""}, {"logprobs", nullptr}, {"finish_reason", finish_reason(*ex)}};
                if (return_tokens) last["tokens"] = ex->tokens;
                json c = chunk(last);
                c["timings"] = timings(rr);
                out += sse(c);
                if (include_usage) {
                  json u = chunk(json::object());
                  u["choices"] = json::array();
                  u["usage"] = usage(rr);
                  out += sse(u);
                }
              }
              out += "data: [DONE]\n\n";
            }
            lock.unlock();
            if (out.empty()) out = ": keep-alive\n\n";  // also finds a client that left
            if (!sink.write(out.data(), out.size())) {
              handle->cancelled = true;
              return false;
            }
            if (done) sink.done();
            return true;
          },
          [handle](bool) { handle->cancelled = true; });  // a no-op once the request is done
      return;
    }

    // Not streamed: wait. A client that disconnects meanwhile is noticed by
    // writing the body in chunks after a short wait: whitespace (valid
    // before JSON) once a second, then the response.
    auto body = [=](Exchange& x) {
      const RequestResult& rr = x.result;
      json j;
      if (chat) {
        json message = {{"role", "assistant"}};
        message["content"] = x.reply->content().empty() && !x.reply->tool_calls().empty() ? json(nullptr)
                                                                                          : json(x.reply->content());
        if (!x.reply->reasoning().empty()) message["reasoning_content"] = x.reply->reasoning();
        if (!x.reply->tool_calls().empty()) {
          json calls = json::array();
          for (const ToolCall& c : x.reply->tool_calls())
            calls.push_back({{"id", random_id("call_")}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
          message["tool_calls"] = calls;
        }
        j = {{"id", id}, {"object", "chat.completion"}, {"created", created_at}, {"model", model_id},
             {"choices", json::array({{{"index", 0}, {"message", message}, {"logprobs", nullptr}, {"finish_reason", finish_reason(x)}}})}};
      } else {
        j = {{"id", id}, {"object", "text_completion"}, {"created", created_at}, {"model", model_id},
             {"choices", json::array({{{"index", 0}, {"text", echo + x.reply->content()}, {"logprobs", nullptr}, {"finish_reason", finish_reason(x)}}})}};
      }
      if (return_tokens) j["choices"][0]["tokens"] = x.tokens;
      j["usage"] = usage(rr);
      j["timings"] = timings(rr);
      return j;
    };
    {
      std::unique_lock lock(ex->mu);
      if (ex->cv.wait_for(lock, std::chrono::seconds(2), [&] { return ex->done; })) {
        if (ex->result.cause == FinishCause::Error) {
          const ApiError e = error_of(ex->result);
          lock.unlock();
          send_error(res, e);
          return;
        }
        res.set_content(text(body(*ex)), "application/json");
        return;
      }
    }
    res.set_chunked_content_provider(
        "application/json",
        [=](size_t, httplib::DataSink& sink) {
          std::unique_lock lock(ex->mu);
          const bool done = ex->cv.wait_for(lock, std::chrono::seconds(1), [&] { return ex->done; });
          std::string out = "\n";
          if (done) out = ex->result.cause == FinishCause::Error ? text(error_of(ex->result).body()) : text(body(*ex));
          lock.unlock();
          if (!sink.write(out.data(), out.size())) {
            handle->cancelled = true;
            return false;
          }
          if (done) sink.done();
          return true;
        },
        [handle](bool) { handle->cancelled = true; });
  }

  json metrics_json() const {
    const SchedulerMetrics m = scheduler->metrics();
    const ExpertCacheStats c = engine.cache().stats();
    return {{"active", m.active}, {"queued", m.queued}, {"parallel", m.parallel},
            {"requests_done", m.requests_done}, {"prompt_tokens", m.prompt_tokens},
            {"cached_tokens", m.cached_tokens}, {"generated_tokens", m.generated_tokens},
            {"tokens_per_second", m.recent_tokens_per_second},
            {"cache_lookups", c.lookups}, {"cache_hits", c.hits}, {"prefetch_hits", c.prefetch_hits},
            {"bytes_read", c.bytes_read}, {"io_busy_seconds", c.io_busy_seconds},
            {"cache_used", engine.cache().used_bytes()}, {"cache_budget", engine.cache().budget()},
            {"rss", current_rss_bytes()}, {"trunk_bytes", engine.model().resident_bytes()}};
  }

  std::string metrics_text() const {
    const SchedulerMetrics m = scheduler->metrics();
    const ExpertCacheStats c = engine.cache().stats();
    std::string out;
    auto metric = [&](const char* name, const char* type, const char* help, double value, const char* labels = "") {
      out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{}{} {}\n", name, help, name, type, name, labels, value);
    };
    metric("tern_prompt_tokens_total", "counter", "Prompt tokens of finished requests", static_cast<double>(m.prompt_tokens));
    metric("tern_prompt_tokens_cached_total", "counter", "Prompt tokens whose KV a kept session held", static_cast<double>(m.cached_tokens));
    metric("tern_generated_tokens_total", "counter", "Tokens generated", static_cast<double>(m.generated_tokens));
    out += "# HELP tern_requests_total Requests by outcome\n# TYPE tern_requests_total counter\n";
    out += fmt::format("tern_requests_total{{outcome=\"ok\"}} {}\n", m.requests_done);
    out += fmt::format("tern_requests_total{{outcome=\"error\"}} {}\n", m.requests_failed);
    out += fmt::format("tern_requests_total{{outcome=\"cancelled\"}} {}\n", m.requests_cancelled);
    out += fmt::format("tern_requests_total{{outcome=\"rejected\"}} {}\n", m.requests_rejected);
    metric("tern_tokens_per_second", "gauge", "Generated tokens per second, all requests, last 5 s", m.recent_tokens_per_second);
    metric("tern_requests_active", "gauge", "Requests decoding now", static_cast<double>(m.active));
    metric("tern_queue_depth", "gauge", "Requests waiting for a slot", static_cast<double>(m.queued));
    metric("tern_forward_steps_total", "counter", "Forward steps run", static_cast<double>(m.steps));
    metric("tern_batch_rows_total", "counter", "Request rows in forward steps (rows / steps = mean batch)", static_cast<double>(m.batched_rows));
    metric("tern_expert_cache_lookups_total", "counter", "Expert cache lookups", static_cast<double>(c.lookups));
    metric("tern_expert_cache_hits_total", "counter", "Expert cache hits", static_cast<double>(c.hits));
    metric("tern_expert_cache_hit_rate", "gauge", "Hits per lookup since start",
           c.lookups ? static_cast<double>(c.hits) / static_cast<double>(c.lookups) : 0.0);
    metric("tern_expert_bytes_read_total", "counter", "Expert bytes read from disk", static_cast<double>(c.bytes_read));
    metric("tern_expert_cache_used_bytes", "gauge", "Expert cache bytes in use", static_cast<double>(engine.cache().used_bytes()));
    metric("tern_expert_cache_budget_bytes", "gauge", "Expert cache budget (--ram)", static_cast<double>(engine.cache().budget()));
    metric("tern_resident_memory_bytes", "gauge", "Resident set size of the process", static_cast<double>(current_rss_bytes()));
    metric("tern_http_requests_total", "counter", "HTTP requests received", static_cast<double>(http_requests.load()));
    return out;
  }
};

HttpServer::HttpServer(Engine& engine, ServerOptions options) {
  if (!is_loopback_host(options.host) && options.api_key.empty())
    fail("refusing to listen on {} without --api-key: anyone on the network could use the model (pass --api-key KEY, "
         "or keep the default --host 127.0.0.1)",
         options.host);
  if (options.max_queue < 0) fail("--queue must be >= 0, got {}", options.max_queue);
  impl_ = std::make_unique<Impl>(engine, std::move(options));
}

HttpServer::~HttpServer() = default;

int HttpServer::bind() {
  auto& o = impl_->opt;
  if (o.port == 0) {
    const int port = impl_->http.bind_to_any_port(o.host);
    if (port < 0) fail("cannot listen on {}: no free port", o.host);
    o.port = port;
  } else if (!impl_->http.bind_to_port(o.host, o.port)) {
    fail("cannot listen on {}:{} (in use, or not an address of this machine)", o.host, o.port);
  }
  // Debian's httplib listens with a backlog of 5 (compiled in): a burst of
  // clients overflows it, the kernel falls back to SYN cookies and resets
  // connections (64 clients in tests/server/test_load.py did). Listening
  // again on the bound socket raises the backlog.
  if (impl_->listen_fd >= 0 && ::listen(impl_->listen_fd, SOMAXCONN) != 0)
    log(LogLevel::Warn, "could not raise the listen backlog: {}", std::strerror(errno));
  return o.port;
}

void HttpServer::run() { impl_->http.listen_after_bind(); }

void HttpServer::stop() {
  impl_->opt_running = false;
  impl_->http.stop();
}

}  // namespace tern
