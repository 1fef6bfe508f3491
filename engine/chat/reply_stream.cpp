#include "chat/reply_stream.h"

#include <algorithm>
#include <array>

namespace strata::chat {

namespace {

constexpr size_t npos = std::string::npos;
constexpr std::string_view kThink = "<think>";
constexpr std::string_view kThinkEnd = "</think>";
constexpr std::string_view kChannel = "<|channel|>";
constexpr std::string_view kMessage = "<|message|>";
constexpr std::string_view kEnd = "<|end|>";
constexpr std::string_view kReturn = "<|return|>";
constexpr std::string_view kCall = "<|call|>";
constexpr std::string_view kStart = "<|start|>";
constexpr std::array<std::string_view, 6> kMarkers = {kChannel, kMessage, kEnd, kReturn, kCall, kStart};

bool blank(char c) { return c == ' ' || c == '\n'; }

size_t common_prefix(std::string_view a, std::string_view b) {
    const size_t n = std::min(a.size(), b.size());
    return size_t(std::mismatch(a.begin(), a.begin() + n, b.begin()).first - a.begin());
}

// dst becomes `want`; kept drops to what dst kept of its old text.
void assign(std::string& dst, size_t& kept, std::string_view want) {
    const size_t same = common_prefix(dst, want);
    kept = std::min(kept, same);
    dst.resize(same);
    dst.append(want.substr(same));
}

}  // namespace

void ReplyStream::append(std::string_view more) {
    const size_t from = text_.size();
    text_.append(more);
    answer_kept_ = parts_.answer.size();
    reasoning_kept_ = parts_.reasoning.size();
    if (mode_ == Mode::Harmony) {
        scan_harmony();
        return;
    }
    // split_reply reads a reply as harmony when <|channel|> is anywhere in it.
    if (text_.find(kChannel, from >= kChannel.size() ? from - kChannel.size() + 1 : 0) != npos) {
        begin_harmony();
        return;
    }
    scan_plain_or_think(from);
}

void ReplyStream::scan_plain_or_think(size_t from) {
    if (mode_ == Mode::Undecided) {
        // Undecided while the reply is blanks and then a prefix of <think>.
        size_t lead = 0;
        while (lead < text_.size() && blank(text_[lead])) ++lead;
        const std::string_view rest = std::string_view(text_).substr(lead);
        if (rest.starts_with(kThink)) {
            mode_ = Mode::Think;
            think_at_ = lead + kThink.size();
            assign(parts_.answer, answer_kept_, {});
        } else if (!rest.empty() && !kThink.starts_with(rest)) {
            mode_ = Mode::Plain;
        }
    }
    if (mode_ == Mode::Plain || mode_ == Mode::Undecided) {
        parts_.answer.append(text_, parts_.answer.size());  // all answer
        return;
    }
    // <think>: the reasoning runs to </think>, the answer starts after it and its blanks.
    if (think_end_ == npos) {
        const size_t look = std::max(think_at_, from >= kThinkEnd.size() ? from - kThinkEnd.size() + 1 : 0);
        if (const size_t at = text_.find(kThinkEnd, look); at != npos) {
            think_end_ = at;
            assign(parts_.reasoning, reasoning_kept_, std::string_view(text_).substr(think_at_, at - think_at_));
            parts_.reasoning_open = false;
        } else {
            parts_.reasoning.append(text_, think_at_ + parts_.reasoning.size());
            parts_.reasoning_open = true;
            return;
        }
    }
    if (answer_at_ == npos) {
        size_t at = think_end_ + kThinkEnd.size();
        while (at < text_.size() && blank(text_[at])) ++at;
        if (at == text_.size()) return;
        answer_at_ = at;
    }
    parts_.answer.append(text_, answer_at_ + parts_.answer.size());
}

void ReplyStream::begin_harmony() {
    // Everything read so far is read again, once, as harmony.
    const std::string old_answer = std::move(parts_.answer), old_reasoning = std::move(parts_.reasoning);
    parts_ = ReplyParts{};
    mode_ = Mode::Harmony;
    scan_at_ = 0;
    scan_harmony();
    answer_kept_ = common_prefix(old_answer, parts_.answer);
    reasoning_kept_ = common_prefix(old_reasoning, parts_.reasoning);
}

void ReplyStream::scan_harmony() {
    const std::string_view t = text_;
    while (scan_at_ < t.size()) {
        const size_t p = t.find("<|", scan_at_);
        if (p == npos) {
            scan_at_ = t.back() == '<' ? t.size() - 1 : t.size();  // a marker may start with the last '<'
            break;
        }
        std::string_view marker;
        bool partial = false;
        for (std::string_view m : kMarkers) {
            if (t.compare(p, m.size(), m) == 0) {
                marker = m;
                break;
            }
            if (t.size() - p < m.size() && m.starts_with(t.substr(p))) partial = true;
        }
        if (marker.empty()) {
            if (partial) {
                scan_at_ = p;  // the rest of the marker is still to come
                break;
            }
            scan_at_ = p + 1;
            continue;
        }
        scan_at_ = p + marker.size();
        if (!in_channel_) {
            // Text before the first channel is neither part.
            if (marker == kChannel) {
                in_channel_ = true;
                last_ = Channel{};
                last_.name_at = scan_at_;
            }
        } else if (last_.content_at == npos) {
            // The channel's name runs to the first <|message|>; other markers in it are skipped.
            if (marker == kMessage) {
                last_.content_at = scan_at_;
                last_.final = t.substr(last_.name_at, p - last_.name_at).starts_with("final");
            }
        } else if (marker == kChannel) {
            close_channel();
            last_ = Channel{};
            last_.name_at = scan_at_;
        } else if (marker == kEnd || marker == kReturn || marker == kCall) {
            if (marker != kCall) last_.closed = true;
            if (last_.cut == npos) last_.cut = p;
        } else if (marker == kStart && last_.cut == npos) {
            last_.last_start = p;
        }
    }
    show_last_channel();
}

void ReplyStream::close_channel() {
    // A later channel closes this one: its text is final.
    const size_t end = last_.last_start != npos ? last_.last_start : last_.cut != npos ? last_.cut : text_.size();
    const std::string_view content = std::string_view(text_).substr(last_.content_at, end - last_.content_at);
    if (last_.final) {
        fixed_answer_ += content;
    } else {
        if (!fixed_reasoning_.empty()) fixed_reasoning_ += "\n\n";
        fixed_reasoning_ += content;
    }
    fixed_open_ = false;
    answer_from_ = reasoning_from_ = npos;  // the fixed parts changed: the next show compares once
}

void ReplyStream::show_last_channel() {
    bool open = fixed_open_;
    std::string_view content;
    const bool shown = in_channel_ && last_.content_at != npos;
    if (shown) {
        // Up to the first end marker, and before the last <|start|> (split_reply's strip).
        const size_t end = last_.last_start != npos ? last_.last_start : last_.cut != npos ? last_.cut : text_.size();
        content = std::string_view(text_).substr(last_.content_at, end - last_.content_at);
        open = last_.final ? false : !last_.closed;
    }
    // The answer and the reasoning are the fixed channels plus the last one.
    // `from` remembers that dst holds fixed (+ separator) and then the start of
    // the channel at `from`, so the common case (the channel grew) appends.
    auto show = [&](std::string& dst, size_t& kept, size_t& from, const std::string& fixed, bool with_last, bool sep) {
        const size_t head = fixed.size() + (sep ? 2 : 0);
        if (with_last && from == last_.content_at && dst.size() >= head && dst.size() - head <= content.size()) {
            dst.append(content.substr(dst.size() - head));
            return;
        }
        std::string want = fixed;
        if (with_last) {
            if (sep) want += "\n\n";
            want += content;
        }
        assign(dst, kept, want);
        from = with_last ? last_.content_at : npos;
    };
    show(parts_.answer, answer_kept_, answer_from_, fixed_answer_, shown && last_.final, false);
    show(parts_.reasoning, reasoning_kept_, reasoning_from_, fixed_reasoning_, shown && !last_.final,
         shown && !last_.final && !fixed_reasoning_.empty());
    parts_.reasoning_open = open;
}

}  // namespace strata::chat
