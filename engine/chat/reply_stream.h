// A reply split into reasoning and answer while it streams.
//
// split_reply() parses a whole reply; called on every token of a long answer
// it re-reads everything written so far, and a view that re-renders the
// answer it returns redoes work that grows with the answer. ReplyStream keeps
// the split up to date as text is appended: each append() reads the new text
// (plus a marker's length of the old), so an answer of n tokens costs O(n) in
// all, not O(n^2). What it holds after any sequence of appends equals
// split_reply() of their concatenation (tested on every split point).
//
// answer_kept() tells a view what it may keep: the answer's first
// answer_kept() bytes are those it had before the last append, the rest is
// new. Usually that is the whole previous answer (the answer only grew); a
// format becoming clear (a reply that turns out to start with <think>, or to
// be harmony) or harmony's <|start|> cut can take back text already shown.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "chat/chat_template.h"

namespace strata::chat {

class ReplyStream {
public:
    void append(std::string_view text);
    void clear() { *this = ReplyStream(); }

    const ReplyParts& parts() const { return parts_; }
    const std::string& text() const { return text_; }
    size_t answer_kept() const { return answer_kept_; }
    size_t reasoning_kept() const { return reasoning_kept_; }

private:
    enum class Mode { Undecided, Plain, Think, Harmony };
    // One harmony message: <|channel|>NAME<|message|>CONTENT.
    struct Channel {
        size_t name_at = 0;                     // after <|channel|>
        size_t content_at = std::string::npos;  // after <|message|>; npos: the name is still streaming
        size_t cut = std::string::npos;         // the first <|end|>, <|return|> or <|call|> in the content
        size_t last_start = std::string::npos;  // the last <|start|> before the cut
        bool closed = false;                    // an <|end|> or <|return|> anywhere in the content
        bool final = false;
    };

    void scan_plain_or_think(size_t from);
    void scan_harmony();
    void begin_harmony();
    void close_channel();
    void show_last_channel();
    void set_answer(std::string_view s);
    void set_reasoning(std::string_view s);

    std::string text_;
    ReplyParts parts_;
    Mode mode_ = Mode::Undecided;
    size_t answer_kept_ = 0, reasoning_kept_ = 0;
    // <think>: where its content starts and where </think> is (npos: open).
    size_t think_at_ = 0, think_end_ = std::string::npos;
    size_t answer_at_ = std::string::npos;  // after </think> and the blanks that follow
    // Harmony: the channels before the last, joined; the last one; where scanning resumes.
    std::string fixed_answer_, fixed_reasoning_;
    bool fixed_open_ = false;
    bool in_channel_ = false;
    Channel last_;
    size_t scan_at_ = 0;
    size_t answer_from_ = std::string::npos, reasoning_from_ = std::string::npos;  // see show_last_channel
};

}  // namespace strata::chat
