#include "serve/tool_calls.h"

namespace strata::serve {

namespace {

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";

std::string trim(std::string_view s) {
    const size_t b = s.find_first_not_of(" \t\r\n");
    if (b == std::string_view::npos) return {};
    const size_t e = s.find_last_not_of(" \t\r\n");
    return std::string(s.substr(b, e - b + 1));
}

}  // namespace

ParsedReply parse_tool_calls(std::string_view text, const std::string& id_prefix) {
    ParsedReply r;
    const size_t first = text.find(kOpen);
    if (first == std::string_view::npos) {
        r.content = std::string(text);
        return r;
    }
    size_t p = first;
    while (p != std::string_view::npos) {
        const size_t body = p + kOpen.size();
        size_t end = text.find(kClose, body);
        const bool closed = end != std::string_view::npos;
        if (!closed) end = text.size();  // a reply cut at max_tokens or the end-of-turn token before the close
        nlohmann::json j;
        try {
            j = nlohmann::json::parse(trim(text.substr(body, end - body)));
        } catch (const nlohmann::json::exception&) {
            return ParsedReply{std::string(text), {}};
        }
        if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return ParsedReply{std::string(text), {}};
        ToolCall c;
        c.id = id_prefix + std::to_string(r.calls.size());
        c.name = j["name"].get<std::string>();
        const nlohmann::json args = j.contains("arguments") ? j["arguments"] : nlohmann::json::object();
        c.arguments = args.is_string() ? args.get<std::string>() : args.dump();
        r.calls.push_back(std::move(c));
        if (!closed) break;
        p = text.find(kOpen, end + kClose.size());
        // Only whitespace may separate calls; anything else after them is dropped with the markup.
    }
    r.content = trim(text.substr(0, first));
    return r;
}

nlohmann::json tool_calls_json(const std::vector<ToolCall>& calls, bool with_index) {
    nlohmann::json a = nlohmann::json::array();
    for (size_t i = 0; i < calls.size(); ++i) {
        nlohmann::json c = {{"id", calls[i].id},
                            {"type", "function"},
                            {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments}}}};
        if (with_index) c["index"] = i;
        a.push_back(std::move(c));
    }
    return a;
}

std::string ToolCallStream::feed(std::string_view piece) {
    pending_ += piece;
    if (in_calls_) return {};
    const size_t at = pending_.find(kOpen);
    if (at != std::string::npos) {
        in_calls_ = true;
        std::string out = pending_.substr(0, at);
        pending_.erase(0, at);
        sent_ += out;
        return out;
    }
    // Keep back a tail that could begin the marker.
    size_t keep = 0;
    for (size_t k = std::min(pending_.size(), kOpen.size() - 1); k > 0; --k)
        if (kOpen.substr(0, k) == std::string_view(pending_).substr(pending_.size() - k)) {
            keep = k;
            break;
        }
    std::string out = pending_.substr(0, pending_.size() - keep);
    pending_.erase(0, pending_.size() - keep);
    sent_ += out;
    return out;
}

ParsedReply ToolCallStream::finish(const std::string& id_prefix) {
    if (!in_calls_) {
        ParsedReply r;
        r.content = pending_;
        pending_.clear();
        return r;
    }
    ParsedReply r = parse_tool_calls(pending_, id_prefix);
    if (r.calls.empty()) r.content = pending_;  // not a call after all: the rest is text
    else r.content.clear();                     // the text before the marker went out already
    pending_.clear();
    return r;
}

}  // namespace strata::serve
