#pragma once
// The OpenAI API's request and response shapes: parsing a request body
// into what the engine needs (every field type-checked; a wrong one is an
// ApiError naming it), and turning a reply's tokens into the response
// objects and stream chunks, stop strings applied. No HTTP here
// (server/http_server.h) and no scheduling (server/scheduler.h).
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tern/runtime/chat_format.h"
#include "tern/runtime/sampler.h"
#include "tern/tokenizer/stream_decoder.h"

namespace tern {

class Tokenizer;

// An error the client caused (or a refusal), as OpenAI reports it:
// {"error": {"message", "type", "param", "code"}} with an HTTP status.
class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string message, std::string type = "invalid_request_error", std::string param = {},
           std::string code = {})
      : std::runtime_error(message), status_(status), type_(std::move(type)), param_(std::move(param)),
        code_(std::move(code)) {}
  int status() const { return status_; }
  nlohmann::ordered_json body() const;

 private:
  int status_;
  std::string type_, param_, code_;
};

nlohmann::ordered_json error_body(const std::string& message, const std::string& type, const std::string& param = {},
                          const std::string& code = {});

// What a /v1/chat/completions or /v1/completions request asks for.
struct CompletionRequest {
  bool chat = true;
  std::string model;                  // as sent ("" when absent)
  std::vector<ChatMessage> messages;  // chat
  ChatFormatOptions format;           // chat: tools, thinking, reasoning effort
  std::string prompt;                 // completions: text
  std::vector<int32_t> prompt_tokens; // completions: token ids instead of text
  std::optional<int64_t> max_tokens;  // max_tokens / max_completion_tokens
  std::vector<std::string> stop;
  SamplerOptions sampling;
  bool seeded = false;                // "seed" given (else the server draws one)
  bool stream = false;
  bool include_usage = false;         // stream_options.include_usage
  bool echo = false;                  // completions: prepend the prompt to the text
  bool ignore_eos = false;            // extension (llama.cpp's): completions do not stop at end-of-sequence tokens
  bool return_tokens = false;
  bool cache_prompt = true;           // extension (llama.cpp's): false = no prefix reuse for this request         // extension (as llama.cpp's): the choice carries "tokens", every sampled id
};

// Parse a request body. `defaults` are the model's sampling defaults
// (generation_config.json); OpenAI's fields override them. Throws ApiError.
CompletionRequest parse_chat_request(const nlohmann::ordered_json& body, const SamplerOptions& defaults);
CompletionRequest parse_completion_request(const nlohmann::ordered_json& body, const SamplerOptions& defaults);

// Part of a reply for the client: text of the answer or of the reasoning,
// or one complete tool call.
struct ReplyDelta {
  std::string content, reasoning;
  std::optional<ToolCall> tool_call;
};

// Turns a reply's tokens into deltas: through the chat format's parser
// (reasoning, answer, tool calls) for a chat, or the plain decoded text
// for a completion; stop strings end the answer (the stop string itself is
// not sent, and text that might begin one is held back until it cannot).
class ReplyAssembler {
 public:
  // `format` null: a raw completion (stop tokens are not text).
  ReplyAssembler(const Tokenizer& tokenizer, const ChatFormat* format, const ChatFormatOptions& options,
                 std::vector<std::string> stops, std::vector<int32_t> stop_tokens);
  // Adds a generated token; appends what it completes to `out`. Returns
  // false when the reply is over (a stop string matched, or the format's end).
  bool push(int32_t id, std::vector<ReplyDelta>& out);
  // The reply ended (any reason): flushes held-back text.
  void finish(std::vector<ReplyDelta>& out);

  const std::string& content() const { return content_; }
  const std::string& reasoning() const { return reasoning_; }
  const std::vector<ToolCall>& tool_calls() const { return tool_calls_; }
  bool stopped_by_string() const { return stop_matched_; }

 private:
  void add_content(const std::string& text, std::vector<ReplyDelta>& out);
  void add(ReplyDelta d, std::vector<ReplyDelta>& out);

  std::unique_ptr<ChatOutputParser> parser_;
  std::unique_ptr<StreamDecoder> decoder_;
  std::vector<std::string> stops_;
  std::vector<int32_t> stop_tokens_;
  std::string held_;  // answer text that may be the start of a stop string
  bool stop_matched_ = false, ended_ = false;
  std::string content_, reasoning_;
  std::vector<ToolCall> tool_calls_;
};

// OpenAI's finish_reason: "stop", "length" or "tool_calls".
std::string finish_reason_name(bool length, bool tool_calls);

}  // namespace tern
