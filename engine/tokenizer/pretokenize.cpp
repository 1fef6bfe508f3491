#include "tokenizer/pretokenize.h"

#include <unicode/regex.h>
#include <unicode/unistr.h>

#include <algorithm>
#include <utility>

#include "common/error.h"
#include "common/log.h"
#include "tokenizer/unicode.h"

namespace strata::tok {
namespace {

// The regexes below are written in ICU syntax, except that `\s` / `\S` are
// rewritten by translate() into the White_Space classes the matcher needs (see
// make_view(): every non-ASCII space has become U+000B by then, so ASCII
// [\t-\r ] is the whole of \s). They are the pre-tokenizer definitions of the
// Hugging Face tokenizer.json files, in the form llama.cpp uses.

// GPT-2. llama.cpp's custom matcher for this pattern also falls back to `\s+`.
constexpr const char* kGpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Llama 3 (the (?i:...) contractions spelled out case by case).
constexpr const char* kLlama3 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Qwen2: as Llama 3 but digits one by one.
constexpr const char* kQwen2 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Qwen3.5: as Qwen2, with combining marks (\p{M}) kept in letter runs.
constexpr const char* kQwen35 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// DeepSeek LLM: cased letters (Lu/Ll/Lt as listed in its tokenizer.json), ASCII and
// full-width punctuation, trailing spaces, CJK / Hangul runs, digit runs.
constexpr const char* kDeepseekLlmLetters =
    R"(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293}\x{295}-\x{2AF})"
    R"(\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1})"
    R"(\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5})"
    R"(\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A})"
    R"(\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B})"
    R"(\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC})"
    R"(\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107})"
    R"(\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134})"
    R"(\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4})"
    R"(\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787})"
    R"(\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A})"
    R"(\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2})"
    R"(\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)";
constexpr const char* kDeepseekLlmPunct =
    R"(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)";
constexpr const char* kCjkHangul = R"([\x{4E00}-\x{9FA5}\x{0800}-\x{4E00}\x{AC00}-\x{D7FF}]+)";

// llama.cpp's \p{S} misses '~' (its ASCII symbol list is $+<=>^`|), kept for parity.
constexpr const char* kDeepseekV3Main =
    R"([!"#\$%\&'()*+,\-./:;<=>?@\[\\\]\^_`\{|\}~][A-Za-z]+|[^\r\n\p{L}\p{P}[\p{S}--[~]]]?[\p{L}\p{M}]+| ?[\p{P}[\p{S}--[~]]]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

constexpr const char* kGpt4o =
    R"([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?)"
    R"(|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?)"
    R"(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

constexpr const char* kTekken =
    R"([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*)"
    R"(|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

constexpr const char* kPoro = R"( ?[^\(\s\|.,!?\x{2026}\x{3002}\x{FF0C}\x{3001}\x{0964}\x{06D4}\x{060C}\)]+)";

struct Entry {
    std::vector<const char*> names;  // first is the canonical one
    std::vector<const char*> regexes;
    bool clean_spaces;
    bool ignore_merges;
    bool force_add_bos;
};

const std::vector<Entry>& entries() {
    static const std::vector<Entry> table = {
        {{"default"}, {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, R"(\p{N}+)", R"([0-9][0-9][0-9])"}, true, false, false},
        {{"gpt-2", "phi-2", "mpt", "olmo", "jais", "jina-es", "jina-de", "jina-v2-es", "jina-v2-de", "gigachat"},
         {kGpt2}, true, false, false},
        {{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral"}, {kLlama3}, true, true, true},
        {{"dbrx", "smaug-bpe", "chatglm-bpe", "glm4"}, {kLlama3}, true, false, false},
        {{"qwen2", "deepseek-r1-qwen"}, {kQwen2}, false, false, false},
        {{"qwen35"}, {kQwen35}, false, false, false},
        {{"stablelm2", "megrez"}, {kQwen2}, true, false, false},
        {{"deepseek-llm"},
         {"[\r\n]", kDeepseekLlmLetters, kDeepseekLlmPunct, R"(\s+\z)", kCjkHangul, R"(\p{N}+)"},
         false, false, false},
        {{"deepseek-coder"}, {"[\r\n]", R"(\s?\p{L}+)", R"(\s?\p{P}+)", kCjkHangul, R"(\p{N})"}, false, false, false},
        {{"deepseek-v3"},
         {R"(\p{N}{1,3})", R"([\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)", kDeepseekV3Main},
         false, false, false},
        {{"falcon"}, {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2, R"([0-9][0-9][0-9])"}, true, false, false},
        {{"starcoder", "refact", "codeshell", "exaone", "minerva-7b"}, {R"(\p{N})", kGpt2}, true, false, false},
        {{"command-r", "smollm"}, {R"(\p{N})", kGpt2}, false, false, false},
        {{"poro-chat"}, {kPoro}, false, false, false},
        {{"bloom", "gpt3-finnish"}, {kPoro}, true, false, false},
        {{"viking"}, {kPoro, R"(\p{N})"}, false, false, false},
        {{"gpt-4o", "llama4", "minimax-m2"}, {kGpt4o}, false, false, false},
        {{"tekken"}, {kTekken}, false, true, true},
    };
    return table;
}

const Entry* find_entry(std::string_view name) {
    for (const auto& e : entries())
        for (const char* n : e.names)
            if (name == n) return &e;
    return nullptr;
}

// Rewrites `\s` and `\S` (see above); everything else is passed through.
std::string translate(std::string_view re) {
    std::string out;
    int depth = 0;
    for (size_t i = 0; i < re.size(); ++i) {
        const char c = re[i];
        if (c == '\\' && i + 1 < re.size()) {
            const char d = re[++i];
            if (d == 's') {
                out += depth > 0 ? "\\t-\\r\\x20" : "[\\t-\\r\\x20]";
            } else if (d == 'S') {
                if (depth > 0) throw Error("pre-tokenizer regex: \\S inside a character class is not supported");
                out += "[^\\t-\\r\\x20]";
            } else {
                out += c;
                out += d;
            }
            continue;
        }
        if (c == '[') ++depth;
        if (c == ']' && depth > 0) --depth;
        out += c;
    }
    return out;
}

// The code points the regexes see: non-ASCII White_Space becomes U+000B (as
// llama.cpp does before matching), lone surrogates (decoded from CESU-style
// bytes) become a private-use character so that ICU never pairs them up.
// Both stand-ins keep the category the original had for every regex here.
inline UChar32 view_of(uint32_t cp) {
    if (cp > 0x7F && uni::is_whitespace(cp)) return 0x0B;
    if (cp >= 0xD800 && cp <= 0xDFFF) return 0xE000;
    return static_cast<UChar32>(cp);
}

}  // namespace

struct PreTokenizer::Impl {
    const Entry* entry = nullptr;
    PreTokenizerTraits traits;
    std::vector<std::unique_ptr<icu::RegexPattern>> patterns;
};

PreTokenizer::PreTokenizer(std::string_view name) : impl_(std::make_unique<Impl>()) {
    impl_->entry = find_entry(name);
    if (!impl_->entry) {
        throw Error("unknown pre-tokenizer '" + std::string(name) + "' (supported: " + known_names() + ")");
    }
    const Entry& e = *impl_->entry;
    impl_->traits.canonical = e.names.front();
    impl_->traits.clean_spaces = e.clean_spaces;
    impl_->traits.ignore_merges = e.ignore_merges;
    impl_->traits.force_add_bos = e.force_add_bos;
    for (const char* re : e.regexes) {
        const std::string icu_re = translate(re);
        UErrorCode status = U_ZERO_ERROR;
        UParseError perr{};
        std::unique_ptr<icu::RegexPattern> p(
            icu::RegexPattern::compile(icu::UnicodeString::fromUTF8(icu_re), 0, perr, status));
        if (U_FAILURE(status) || !p) {
            throw Error("pre-tokenizer '" + std::string(name) + "': cannot compile regex (" + u_errorName(status) +
                        " at offset " + std::to_string(perr.offset) + "): " + icu_re);
        }
        impl_->patterns.push_back(std::move(p));
    }
}

PreTokenizer::~PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;

bool PreTokenizer::is_known(std::string_view name) { return find_entry(name) != nullptr; }

std::string PreTokenizer::known_names() {
    std::string s;
    for (const auto& e : entries())
        for (const char* n : e.names) {
            if (!s.empty()) s += ", ";
            s += n;
        }
    return s;
}

const PreTokenizerTraits& PreTokenizer::traits() const { return impl_->traits; }

std::vector<std::string> PreTokenizer::split(std::string_view text) const {
    std::vector<std::string> words;
    if (text.empty()) return words;

    const std::vector<uint32_t> cps = uni::decode_lenient(text);
    const int32_t n = static_cast<int32_t>(cps.size());

    // The matcher's view as UTF-16, with index maps both ways.
    icu::UnicodeString view;
    std::vector<int32_t> cp_to_u16(size_t(n) + 1);
    for (int32_t i = 0; i < n; ++i) {
        cp_to_u16[i] = view.length();
        view.append(view_of(cps[i]));
    }
    cp_to_u16[n] = view.length();
    std::vector<int32_t> u16_to_cp(size_t(view.length()) + 1, 0);
    for (int32_t i = 0; i <= n; ++i) u16_to_cp[cp_to_u16[i]] = i;

    // Pieces as [begin, end) in code points.
    std::vector<std::pair<int32_t, int32_t>> pieces{{0, n}};
    std::vector<std::pair<int32_t, int32_t>> next;
    for (const auto& pattern : impl_->patterns) {
        UErrorCode status = U_ZERO_ERROR;
        std::unique_ptr<icu::RegexMatcher> m(pattern->matcher(view, status));
        if (U_FAILURE(status) || !m) {
            logger("tokenizer")->warn("pre-tokenizer: cannot create a regex matcher ({})", u_errorName(status));
            continue;
        }
        next.clear();
        next.reserve(pieces.size() * 2);
        for (const auto& [b, e] : pieces) {
            status = U_ZERO_ERROR;
            m->region(cp_to_u16[b], cp_to_u16[e], status);
            int32_t prev = b;
            while (U_SUCCESS(status) && m->find(status)) {
                const int32_t ms = u16_to_cp[m->start(status)];
                const int32_t me = u16_to_cp[m->end(status)];
                if (U_FAILURE(status)) break;
                if (me <= ms) continue;  // empty match: nothing to cut
                if (ms > prev) next.emplace_back(prev, ms);
                next.emplace_back(ms, me);
                prev = me;
            }
            if (U_FAILURE(status)) {
                // e.g. the backtracking stack limit: keep the rest whole rather than fail.
                logger("tokenizer")->warn("pre-tokenizer: regex matching stopped early ({})", u_errorName(status));
            }
            if (prev < e) next.emplace_back(prev, e);
        }
        pieces.swap(next);
    }

    words.reserve(pieces.size());
    for (const auto& [b, e] : pieces) {
        std::string w;
        w.reserve(size_t(e - b));
        for (int32_t i = b; i < e; ++i) uni::append_utf8(w, cps[i]);
        words.push_back(std::move(w));
    }
    return words;
}

}  // namespace strata::tok
