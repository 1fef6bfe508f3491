// Stop strings in streamed text.
//
// Feed the decoded text pieces as they come. push() returns the text that is safe to show
// now and holds back any suffix that could still become a stop string. When a stop string
// completes, it and everything after it are dropped, and the result says which one matched.
//
// When several stop strings could complete in the same text, the one that ends first wins
// (at the same end, the longest): the outcome does not depend on how the text was cut into
// pieces. Text is handled as bytes; since stop strings are whole UTF-8 strings, a held-back
// suffix always starts on a character boundary of valid UTF-8 text.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace strata::sched {

class StopMatcher {
public:
    // Empty strings in `stops` are ignored (SamplingParams::validate() rejects them).
    explicit StopMatcher(std::vector<std::string> stops);

    struct Result {
        // Safe to show now. (Not named "emit": that is a Qt macro, and Qt code includes this.)
        std::string text;
        bool stopped = false;  // a stop string completed (now or earlier)
        std::string matched;   // which one
    };
    // After a stop, further pieces are ignored: text is empty and stopped stays true.
    Result push(std::string_view piece);

    // At the end of generation: what was held back (empty after a stop).
    std::string flush();

    // Back to the initial state, for reuse with another request.
    void reset();

    bool stopped() const { return stopped_; }
    const std::vector<std::string>& stops() const { return stops_; }

private:
    std::vector<std::string> stops_;
    size_t max_len_ = 0;
    std::string held_;
    bool stopped_ = false;
    std::string matched_;
};

}  // namespace strata::sched
