#include "sched/stop_strings.h"

#include <algorithm>

namespace strata::sched {

StopMatcher::StopMatcher(std::vector<std::string> stops) {
    for (auto& s : stops)
        if (!s.empty()) stops_.push_back(std::move(s));
    for (const auto& s : stops_) max_len_ = std::max(max_len_, s.size());
}

StopMatcher::Result StopMatcher::push(std::string_view piece) {
    Result r;
    if (stopped_) {
        r.stopped = true;
        r.matched = matched_;
        return r;
    }
    if (stops_.empty()) {
        r.text.assign(piece);
        return r;
    }
    held_.append(piece);

    // A complete stop string: the one that ends first, at equal ends the longest. Nothing
    // held before this piece contained a whole stop string, so any match ends in it.
    size_t best_start = std::string::npos, best_end = std::string::npos;
    const std::string* best = nullptr;
    for (const auto& s : stops_) {
        const size_t pos = held_.find(s);
        if (pos == std::string::npos) continue;
        const size_t end = pos + s.size();
        if (best == nullptr || end < best_end || (end == best_end && pos < best_start)) {
            best = &s;
            best_start = pos;
            best_end = end;
        }
    }
    if (best != nullptr) {
        r.text = held_.substr(0, best_start);
        r.stopped = true;
        r.matched = *best;
        stopped_ = true;
        matched_ = *best;
        held_.clear();
        return r;
    }

    // Hold back the longest suffix that is a proper prefix of some stop string.
    size_t hold = 0;
    for (size_t k = std::min(held_.size(), max_len_ - 1); k > 0 && hold == 0; --k) {
        const std::string_view tail = std::string_view(held_).substr(held_.size() - k);
        for (const auto& s : stops_)
            if (s.size() > k && std::string_view(s).substr(0, k) == tail) {
                hold = k;
                break;
            }
    }
    r.text = held_.substr(0, held_.size() - hold);
    held_.erase(0, held_.size() - hold);
    return r;
}

std::string StopMatcher::flush() {
    std::string out;
    out.swap(held_);
    return out;
}

void StopMatcher::reset() {
    held_.clear();
    stopped_ = false;
    matched_.clear();
}

}  // namespace strata::sched
