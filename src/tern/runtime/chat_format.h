#pragma once
// Chat formats: how a conversation becomes a model's prompt text, which
// tokens end a reply, and how a reply's generated tokens turn back into
// reasoning, answer text and tool calls. One implementation per model family:
// Qwen3 ChatML (chat_template.h), OpenAI harmony for gpt-oss (harmony.h),
// Mistral's [INST] for Mixtral and Tulu's for OLMoE (plain_chat.h) and
// DeepSeek-V3's (deepseek_chat.h), GLM-4.5's (glm45_chat.h) and Gemma 4's
// (gemma_chat.h). make_chat_format() picks the model's.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tern/tokenizer/stream_decoder.h"

namespace tern {

class Tokenizer;

// A function call made by an assistant message (OpenAI's tool_calls[i].function).
struct ToolCall {
  std::string name;       // e.g. "get_weather"
  std::string arguments;  // JSON text, e.g. {"city": "Paris"}
};

// A function the model may call (OpenAI's tools[i] with type "function").
struct ToolDefinition {
  std::string name;
  std::string description = {};
  // The JSON Schema of the arguments as the client sent it (an object), key
  // order kept; empty when the tool takes none.
  std::string parameters = {};
  // The whole tools[i] object as the client sent it, key order kept (Qwen3's
  // template renders it with |tojson).
  std::string json = {};
};

// One message of a conversation, in OpenAI's terms.
struct ChatMessage {
  std::string role;                       // system | developer | user | assistant | tool
  std::string content;                    // assistant: the final answer; tool: the tool's output
  std::string reasoning = {};             // assistant: chain of thought (harmony analysis, Qwen3 <think>)
  std::vector<ToolCall> tool_calls = {};  // assistant: the calls this message makes
};

// How to render. Fields a format does not use are ignored.
struct ChatFormatOptions {
  bool add_generation_prompt = true;        // end with the opening of an assistant reply
  // Thinking on or off; unset: the format's default (Qwen3, GLM-4.5: on, as
  // their templates; Gemma 4: off, as its template). Qwen3: false adds an
  // empty <think> block.
  std::optional<bool> enable_thinking = {};
  std::string reasoning_effort = "medium";  // harmony: low | medium | high
  std::string date = {};                    // harmony "Current date:", YYYY-MM-DD; empty = today (local time)
  std::vector<ToolDefinition> tools = {};   // functions offered to the model (rendered as its template does)
};

// Something the output parser recognised in a reply.
struct ChatEvent {
  enum class Kind {
    Reasoning,  // text of the chain of thought
    Content,    // text of the answer
    ToolCall,   // a complete call: name and arguments
    End,        // the reply ended with a stop token
  };
  Kind kind;
  std::string text = {};  // Reasoning/Content: whole UTF-8 characters; ToolCall: the arguments
  std::string name = {};  // ToolCall: the function
};

enum class FinishReason { None, Stop, ToolCalls };

// Parses one reply's generated tokens as they arrive. Whatever the model
// writes (unknown channels, stray special tokens, invalid UTF-8), it never
// throws: text it cannot place is answer text.
class ChatOutputParser {
 public:
  virtual ~ChatOutputParser() = default;
  // Adds one generated token; returns the events it completes (often none).
  // Tokens after the reply has ended are ignored.
  virtual std::vector<ChatEvent> push(int32_t id) = 0;
  // Generation stopped without a stop token (token limit): returns the
  // held-back text and closes an open tool call.
  virtual std::vector<ChatEvent> finish() = 0;

  // Whether a token that ends the reply has been pushed (stop generating).
  bool done() const { return finish_ != FinishReason::None; }
  FinishReason finish_reason() const { return finish_; }
  // The reply as the conversation history stores it (role "assistant";
  // content = the answer, reasoning = the chain of thought, tool calls).
  const ChatMessage& reply() const { return reply_; }

 protected:
  ChatMessage reply_{"assistant", ""};
  FinishReason finish_ = FinishReason::None;
};

// What the token-level parsers (ChatML, DeepSeek, GLM-4.5) share: a stop
// token ends the reply (End event; finish reason ToolCalls when it made
// calls, else Stop), any other token goes to handle(); finish() ends a reply
// cut short. end_reply() flushes what the parser holds back.
class ReplyParser : public ChatOutputParser {
 public:
  std::vector<ChatEvent> push(int32_t id) final;
  std::vector<ChatEvent> finish() final;

 protected:
  ReplyParser(const Tokenizer& tokenizer, std::vector<int32_t> stops)
      : tokenizer_(tokenizer), decoder_(tokenizer), stops_(std::move(stops)) {}
  virtual void handle(int32_t id, std::vector<ChatEvent>& events) = 0;
  virtual void end_reply(std::vector<ChatEvent>& events) = 0;

  const Tokenizer& tokenizer_;
  StreamDecoder decoder_;
  std::vector<int32_t> stops_;
};

// A model's chat format. Immutable; safe to share between threads.
class ChatFormat {
 public:
  virtual ~ChatFormat() = default;
  // "qwen3-chatml", "qwen2-chatml", "harmony", "mistral-instruct", "tulu", "deepseek-v3", "glm-4.5" or "gemma4".
  virtual std::string_view name() const = 0;
  // The prompt text of a conversation, special tokens spelled out: encode it
  // with special tokens allowed, as Hugging Face's apply_chat_template +
  // tokenizer do. Throws tern::Error on a conversation the format cannot
  // express (unknown role, misplaced system message, ...).
  virtual std::string render(std::span<const ChatMessage> messages, const ChatFormatOptions& options) const = 0;
  // Token ids that end a reply (pass them to generate()); the parser reports
  // done() on exactly these.
  virtual const std::vector<int32_t>& stop_tokens() const = 0;
  // A parser for one reply to a prompt rendered with `options`.
  virtual std::unique_ptr<ChatOutputParser> make_parser(const ChatFormatOptions& options) const = 0;
};

// The chat format of a model: harmony for gpt_oss (or any tokenizer with
// harmony's <|start|>/<|channel|>/<|message|> and no ChatML tokens), Qwen3
// ChatML for a tokenizer with <|im_start|>/<|im_end|> (Qwen2's flavour for
// qwen2_moe), Mistral's [INST] for mixtral, Tulu's for olmoe, DeepSeek-V3's
// for deepseek_v3, GLM-4.5's for glm4_moe, Gemma 4's for gemma4 / gemma4_text
// (GemmaFlavor::Small when `hf_template` has no empty thought block in its
// generation prompt); otherwise an error.
// `model_stops` are the model's configured end-of-sequence ids
// (Engine::stop_tokens()); the format adds its own and removes ids that are
// structure, not stops (harmony's <|end|>). `hf_template`, the model's own
// chat_template text (Engine::hf_chat_template()), tells variants of one
// family apart: a ChatML template whose generation prompt opens
// "<think>\n" (Qwen3-*-Thinking-2507, Qwen3-Next-80B-A3B-Thinking) gets
// ChatmlFlavor::Qwen3Thinking; one without an enable_thinking switch
// (Qwen3-*-Instruct-2507, Qwen3-Next-80B-A3B-Instruct) Qwen3Instruct. The
// tokenizer must outlive the format.
std::unique_ptr<ChatFormat> make_chat_format(std::string_view architecture, const Tokenizer& tokenizer,
                                             std::span<const int32_t> model_stops, std::string_view hf_template = {});

// How many leading tokens of `prompt` (the rendering of `messages` with
// options.add_generation_prompt, tokenized) the next turn's prompt will
// share: that turn renders this reply as an assistant message, which need not
// begin as the generation prompt does (Gemma 4's empty thought block, Qwen3's
// empty <think>), so a placeholder reply is rendered and compared. A model
// with sliding-window rings can step back only to a checkpoint (Session::
// checkpoint): the chat CLI and the server take theirs here.
size_t tokens_shared_with_next_turn(const ChatFormat& format, const Tokenizer& tokenizer,
                                    std::vector<ChatMessage> messages, ChatFormatOptions options,
                                    std::span<const int32_t> prompt);

}  // namespace tern
