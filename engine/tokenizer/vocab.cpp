// Vocabulary loading from GGUF metadata, special-token partitioning, encode and
// decode. See vocab.h for the behaviour; the rules are llama.cpp's.
#include "tokenizer/vocab.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "common/error.h"
#include "common/log.h"
#include "gguf/gguf.h"
#include "tokenizer/unicode.h"
#include "tokenizer/vocab_impl.h"

namespace strata::tok {
namespace {

constexpr const char* kKeyModel = "tokenizer.ggml.model";
constexpr const char* kKeyPre = "tokenizer.ggml.pre";
constexpr const char* kKeyTokens = "tokenizer.ggml.tokens";
constexpr const char* kKeyScores = "tokenizer.ggml.scores";
constexpr const char* kKeyTypes = "tokenizer.ggml.token_type";
constexpr const char* kKeyMerges = "tokenizer.ggml.merges";
constexpr const char* kKeyAddBos = "tokenizer.ggml.add_bos_token";
constexpr const char* kKeyAddEos = "tokenizer.ggml.add_eos_token";
constexpr const char* kKeyAddPrefix = "tokenizer.ggml.add_space_prefix";
constexpr const char* kKeyBos = "tokenizer.ggml.bos_token_id";
constexpr const char* kKeyEos = "tokenizer.ggml.eos_token_id";
constexpr const char* kKeyEot = "tokenizer.ggml.eot_token_id";
constexpr const char* kKeyEom = "tokenizer.ggml.eom_token_id";
constexpr const char* kKeyUnk = "tokenizer.ggml.unknown_token_id";
constexpr const char* kKeySep = "tokenizer.ggml.seperator_token_id";  // sic, as llama.cpp writes it
constexpr const char* kKeyPad = "tokenizer.ggml.padding_token_id";

// Texts that mark end-of-turn tokens when tokenizer.ggml.eot_token_id is absent
// (in priority order), and texts of every end-of-generation token.
constexpr const char* kEotTexts[] = {"<|eot_id|>",     "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                                     "<|end_of_text|>", "<EOT>",      "_<EOT>",  "[EOT]",
                                     "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
                                     "<end_of_utterance>"};
constexpr const char* kEogTexts[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>",
                                     "<|calls|>", "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>",
                                     "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>", "<end_of_utterance>",
                                     "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>"};

std::string where(const gguf::File& f, std::string_view key) { return f.path() + ": " + std::string(key) + ": "; }

const std::vector<gguf::Value>& require_array(const gguf::File& f, const char* key) {
    const auto* arr = f.get_array(key);
    if (!arr) throw Error(f.path() + ": " + key + " is missing (the file has no tokenizer vocabulary)");
    return *arr;
}

int64_t integer_of(const gguf::Value& v) {
    switch (v.type) {
        case gguf::ValueType::INT8: case gguf::ValueType::INT16: case gguf::ValueType::INT32:
        case gguf::ValueType::INT64:
            return v.i;
        default:
            return static_cast<int64_t>(v.u);
    }
}

bool is_int_type(gguf::ValueType t) {
    switch (t) {
        case gguf::ValueType::UINT8: case gguf::ValueType::INT8: case gguf::ValueType::UINT16:
        case gguf::ValueType::INT16: case gguf::ValueType::UINT32: case gguf::ValueType::INT32:
        case gguf::ValueType::UINT64: case gguf::ValueType::INT64:
            return true;
        default:
            return false;
    }
}

// A special token id key: absent -> unchanged; 0xFFFFFFFF / -1 -> none; else must be in range.
void read_special_id(const gguf::File& f, const char* key, int32_t n_tokens, int32_t& id) {
    const gguf::Value* v = f.find(key);
    if (!v) return;
    if (!is_int_type(v->type)) {
        throw Error(where(f, key) + "expected an integer token id, found " + gguf::value_type_name(v->type));
    }
    const bool is_signed = v->type == gguf::ValueType::INT8 || v->type == gguf::ValueType::INT16 ||
                           v->type == gguf::ValueType::INT32 || v->type == gguf::ValueType::INT64;
    if ((is_signed && v->i == -1) || (!is_signed && (v->u == 0xFFFFFFFFull || v->u == ~0ull))) {
        id = -1;
        return;
    }
    const int64_t value = is_signed ? v->i : (v->u > uint64_t(INT64_MAX) ? -1 : int64_t(v->u));
    if (value < 0 || value >= n_tokens) {
        throw Error(where(f, key) + "token id " + (is_signed ? std::to_string(v->i) : std::to_string(v->u)) +
                    " is out of range (the vocabulary has " + std::to_string(n_tokens) + " tokens)");
    }
    id = static_cast<int32_t>(value);
}

uint32_t attr_of_type(TokenType t) {
    switch (t) {
        case TokenType::Normal: return kAttrNormal;
        case TokenType::Unknown: return kAttrUnknown;
        case TokenType::Control: return kAttrControl;
        case TokenType::UserDefined: return kAttrUserDefined;
        case TokenType::Unused: return kAttrUnused;
        case TokenType::Byte: return kAttrByte;
        default: return kAttrUndefined;
    }
}

// "<0xAB>" -> 0xAB, -1 when `t` is not of that form.
int parse_byte_token(std::string_view t) {
    if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return -1;
    int v = 0;
    for (int k = 3; k < 5; ++k) {
        const char c = t[k];
        int d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
        else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        else return -1;
        v = v * 16 + d;
    }
    return v;
}

std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
    std::string out;
    out.reserve(s.size());
    size_t pos = 0;
    while (true) {
        const size_t hit = s.find(from, pos);
        if (hit == std::string_view::npos) break;
        out.append(s.substr(pos, hit - pos));
        out.append(to);
        pos = hit + from.size();
    }
    out.append(s.substr(pos));
    return out;
}

// The text of one token as llama.cpp's token_to_piece(special = true) gives it.
std::string compute_piece(const Vocab::Impl& m, const TokenData& t) {
    if (t.attr & (kAttrUnknown | kAttrControl | kAttrUserDefined)) return t.text;
    if (t.attr & kAttrNormal) {
        if (m.model == Vocab::Model::SPM) return replace_all(t.text, "\xE2\x96\x81", " ");
        // Byte-level: each character stands for one byte. A character outside the
        // map (a malformed vocabulary) is passed through as UTF-8.
        std::string out;
        for (const uint32_t cp : uni::decode_lenient(t.text)) {
            const int b = uni::unicode_to_byte(cp);
            if (b >= 0)
                out.push_back(static_cast<char>(b));
            else
                uni::append_utf8(out, cp);
        }
        return out;
    }
    if (t.attr & kAttrByte) {
        const int b = parse_byte_token(t.text);
        return b >= 0 ? std::string(1, static_cast<char>(b)) : t.text;
    }
    return {};
}

// llama.cpp's clean_spaces passes over the detokenized text, verbatim in effect:
// " ?" " !" " ." " ," lose the space; " ' " becomes "'"; " 's" " 'm" " 're" " 've"
// lose the space.
void clean_up_spaces(std::string& t) {
    size_t n = t.size();
    if (n == 0) return;
    size_t total = 1;
    for (size_t i = 1; i < n; ++i) {
        const char x = t[i];
        if (t[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) --total;
        t[total++] = x;
    }
    n = total;
    total = 1;
    for (size_t i = 1; i < n; ++i) {
        const char x = t[i];
        if (x == '\'' && i + 1 < n && t[i - 1] == ' ' && t[i + 1] == ' ') {
            --total;        // drop the space before
            t[++i] = '\0';  // and skip the one after
        }
        t[total++] = x;
    }
    n = total;
    total = 1;
    for (size_t i = 1; i < n; ++i) {
        const char x = t[i];
        if (t[i - 1] == ' ' && x == '\'' && i + 1 < n) {
            const char x1 = t[i + 1];
            if (x1 == 't' || x1 == 'd') {
                // kept: " 't", " 'd"
            } else if (x1 == 's' || x1 == 'm') {
                --total;
            } else if (i + 2 < n) {
                const char x2 = t[i + 2];
                if ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) --total;
            }
        }
        t[total++] = x;
    }
    t.resize(total);
}

struct Fragment {
    int32_t token;  // -1: raw text
    size_t off;
    size_t len;
};

bool is_c_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

// Cuts the special tokens out of `text` the way llama.cpp's tokenizer_st_partition
// does: tokens in order of decreasing length, each one splitting every raw
// fragment at all its (non-overlapping, leftmost-first) occurrences.
std::vector<Fragment> partition(const Vocab::Impl& m, std::string_view text, bool parse_special) {
    std::vector<Fragment> frags;
    if (text.empty()) return frags;
    frags.push_back({-1, 0, text.size()});
    if (m.special_tokens.empty()) return frags;

    // Which special tokens occur at all (trie walk from every position).
    std::vector<uint8_t> occurs(m.special_tokens.size(), 0);
    bool any = false;
    const auto& nodes = m.special_trie.nodes;
    for (size_t i = 0; i < text.size(); ++i) {
        int32_t node = 0;
        for (size_t j = i; j < text.size(); ++j) {
            node = m.special_trie.child(node, static_cast<uint8_t>(text[j]));
            if (node < 0) break;
            if (nodes[node].token >= 0) {
                occurs[nodes[node].token] = 1;
                any = true;
            }
        }
    }
    if (!any) return frags;

    std::vector<Fragment> next;
    for (size_t k = 0; k < m.special_tokens.size(); ++k) {
        if (!occurs[k]) continue;
        const int32_t id = m.special_tokens[k];
        const TokenData& td = m.tokens[id];
        if (!parse_special && (td.attr & (kAttrControl | kAttrUnknown))) continue;
        const std::string_view needle = td.text;
        next.clear();
        for (const Fragment& f : frags) {
            if (f.token >= 0) {
                next.push_back(f);
                continue;
            }
            size_t off = f.off, len = f.len;
            while (len > 0) {
                const size_t hit = text.substr(0, off + len).find(needle, off);
                if (hit == std::string_view::npos) break;
                if (hit > off) {
                    size_t left = hit - off;
                    if (td.attr & kAttrLstrip)
                        while (left > 0 && is_c_space(text[off + left - 1])) --left;
                    if (left > 0) next.push_back({-1, off, left});
                }
                next.push_back({id, hit, needle.size()});
                size_t r_off = hit + needle.size();
                size_t r_len = off + len - r_off;
                if (r_len > 0 && (td.attr & kAttrRstrip))
                    while (r_len > 0 && is_c_space(text[r_off])) {
                        ++r_off;
                        --r_len;
                    }
                off = r_off;
                len = r_len;
            }
            if (len > 0) next.push_back({-1, off, len});
        }
        frags.swap(next);
    }
    return frags;
}

}  // namespace

void SpecialTrie::insert(std::string_view s, int32_t token) {
    int32_t node = 0;
    for (const char c : s) {
        const auto b = static_cast<uint8_t>(c);
        auto& next = nodes[node].next;
        auto it = std::lower_bound(next.begin(), next.end(), b,
                                   [](const std::pair<uint8_t, int32_t>& e, uint8_t v) { return e.first < v; });
        if (it != next.end() && it->first == b) {
            node = it->second;
        } else {
            const auto created = static_cast<int32_t>(nodes.size());
            next.insert(it, {b, created});
            nodes.emplace_back();  // invalidates `next`; not used again
            node = created;
        }
    }
    nodes[node].token = token;
}

int32_t SpecialTrie::child(int32_t node, uint8_t b) const {
    const auto& next = nodes[node].next;
    auto it = std::lower_bound(next.begin(), next.end(), b,
                               [](const std::pair<uint8_t, int32_t>& e, uint8_t v) { return e.first < v; });
    return (it != next.end() && it->first == b) ? it->second : -1;
}

Vocab::Vocab() : impl_(std::make_unique<Impl>()) {}
Vocab::~Vocab() = default;

std::unique_ptr<Vocab> Vocab::from_gguf(const gguf::File& f) {
    std::unique_ptr<Vocab> v(new Vocab());
    Impl& m = *v->impl_;
    auto log = logger("tokenizer");

    // --- model and pre-tokenizer
    if (!f.has(kKeyModel)) throw Error(f.path() + ": " + kKeyModel + " is missing (the file has no tokenizer)");
    const std::string model = f.get_string(kKeyModel);
    if (model == "llama") {
        m.model = Model::SPM;
    } else if (model == "gpt2") {
        m.model = Model::BPE;
    } else {
        throw Error(where(f, kKeyModel) + "unknown tokenizer model '" + model +
                    "' (supported: 'llama' = SentencePiece BPE, 'gpt2' = byte-level BPE)");
    }
    const std::string pre = f.get_string_or(kKeyPre, "");
    m.pre = pre.empty() ? "default" : pre;
    if (m.model == Model::BPE) {
        if (pre.empty()) {
            log->warn("{}: {} is missing, using the 'default' pre-tokenizer; tokenization may differ from the "
                      "model's own (regenerate the GGUF file)",
                      f.path(), kKeyPre);
        }
        if (!PreTokenizer::is_known(m.pre)) {
            throw Error(where(f, kKeyPre) + "unknown pre-tokenizer '" + m.pre +
                        "' (supported: " + PreTokenizer::known_names() + ")");
        }
        m.pretok = std::make_unique<PreTokenizer>(m.pre);
    }

    // --- tokens, scores, types
    const auto& toks = require_array(f, kKeyTokens);
    if (!toks.empty() && toks.front().type != gguf::ValueType::STRING) {
        throw Error(where(f, kKeyTokens) + "expected an array of strings, found an array of " +
                    gguf::value_type_name(toks.front().type));
    }
    if (toks.empty()) throw Error(where(f, kKeyTokens) + "the vocabulary is empty");
    if (toks.size() > size_t(INT32_MAX)) throw Error(where(f, kKeyTokens) + "too many tokens");
    const auto n = static_cast<int32_t>(toks.size());

    const std::vector<gguf::Value>* scores = f.get_array(kKeyScores);
    if (scores) {
        if (scores->size() != toks.size()) {
            throw Error(where(f, kKeyScores) + "has " + std::to_string(scores->size()) + " entries but " + kKeyTokens +
                        " has " + std::to_string(toks.size()));
        }
        if (!scores->empty() && !scores->front().is_float() && scores->front().type != gguf::ValueType::INT32) {
            throw Error(where(f, kKeyScores) + "expected an array of float32, found an array of " +
                        gguf::value_type_name(scores->front().type));
        }
    }
    const std::vector<gguf::Value>* types = f.get_array(kKeyTypes);
    if (types) {
        if (types->size() != toks.size()) {
            throw Error(where(f, kKeyTypes) + "has " + std::to_string(types->size()) + " entries but " + kKeyTokens +
                        " has " + std::to_string(toks.size()));
        }
        if (!types->empty() && !is_int_type(types->front().type)) {
            throw Error(where(f, kKeyTypes) + "expected an array of int32, found an array of " +
                        gguf::value_type_name(types->front().type));
        }
    }

    m.tokens.resize(size_t(n));
    m.text_to_id.reserve(size_t(n));
    for (int32_t i = 0; i < n; ++i) {
        TokenData& t = m.tokens[i];
        t.text = toks[i].str;
        if (t.text.empty()) {
            log->warn("{}: empty token at index {}", f.path(), i);
            t.text = "[EMPTY_" + std::to_string(i) + "]";
        }
        if (scores) {
            const auto& s = (*scores)[i];
            t.score = s.is_float() ? static_cast<float>(s.f) : static_cast<float>(integer_of(s));
        }
        t.type = TokenType::Normal;
        if (types) {
            const int64_t ty = integer_of((*types)[i]);
            t.type = (ty >= 0 && ty <= 6) ? static_cast<TokenType>(ty) : TokenType::Undefined;
        }
        t.attr = attr_of_type(t.type);
        const auto [it, inserted] = m.text_to_id.emplace(t.text, i);
        if (!inserted) {
            throw Error(where(f, kKeyTokens) + "duplicate token '" + t.text + "' (ids " + std::to_string(it->second) +
                        " and " + std::to_string(i) + ")");
        }
    }

    // --- defaults per model, then the metadata
    if (m.model == Model::SPM) {
        m.bos = 1;
        m.eos = 2;
        m.unk = 0;
        m.add_space_prefix = true;
        m.clean_spaces = false;
        m.add_bos = true;
        m.add_eos = false;
        for (int32_t* id : {&m.bos, &m.eos, &m.unk})
            if (*id >= n) *id = -1;
    } else {
        const auto& tr = m.pretok->traits();
        m.add_space_prefix = false;
        m.clean_spaces = tr.clean_spaces;
        m.ignore_merges = tr.ignore_merges;
        m.add_bos = tr.force_add_bos;
        m.add_eos = false;
    }
    m.add_space_prefix = f.get_bool_or(kKeyAddPrefix, m.add_space_prefix);

    read_special_id(f, kKeyBos, n, m.bos);
    read_special_id(f, kKeyEos, n, m.eos);
    read_special_id(f, kKeyEot, n, m.eot);
    read_special_id(f, kKeyEom, n, m.eom);
    read_special_id(f, kKeyUnk, n, m.unk);
    read_special_id(f, kKeySep, n, m.sep);
    read_special_id(f, kKeyPad, n, m.pad);

    m.add_bos = f.get_bool_or(kKeyAddBos, m.add_bos);
    m.add_eos = f.get_bool_or(kKeyAddEos, m.add_eos);
    if (m.add_bos && m.bos < 0)
        throw Error(f.path() + ": " + kKeyAddBos + " is true but " + kKeyBos + " is not set");
    if (m.add_eos && m.eos < 0)
        throw Error(f.path() + ": " + kKeyAddEos + " is true but " + kKeyEos + " is not set");

    // --- BPE merges and symbols
    if (m.model == Model::BPE) {
        const auto& merges = require_array(f, kKeyMerges);
        if (!merges.empty() && merges.front().type != gguf::ValueType::STRING) {
            throw Error(where(f, kKeyMerges) + "expected an array of strings, found an array of " +
                        gguf::value_type_name(merges.front().type));
        }
        m.merges.reserve(merges.size());
        size_t malformed = 0;
        for (size_t r = 0; r < merges.size(); ++r) {
            const std::string& s = merges[r].str;
            const size_t sp = s.find(' ', 1);
            if (sp == std::string::npos) {
                ++malformed;
                continue;
            }
            const std::string left = s.substr(0, sp), right = s.substr(sp + 1);
            const int32_t l = m.intern_symbol(left);
            const int32_t rr = m.intern_symbol(right);
            const int32_t res = m.intern_symbol(left + right);
            m.merges.emplace((uint64_t(uint32_t(l)) << 32) | uint32_t(rr), BpeMerge{int32_t(r), res});
        }
        if (malformed) log->warn("{}: {} entries of {} have no space and were ignored", f.path(), malformed, kKeyMerges);
        for (int b = 0; b < 256; ++b) m.byte_symbol[b] = m.symbol_id(uni::byte_to_unicode(uint8_t(b)));
    } else {
        for (int b = 0; b < 256; ++b) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "<0x%02X>", b);
            int32_t id = m.lookup(buf);
            if (id < 0) id = m.lookup(std::string(1, static_cast<char>(b)));
            m.byte_token[b] = id;
        }
    }

    // --- end of generation (llama.cpp detects these by text; such tokens become control)
    const auto make_control = [&](int32_t id) {
        TokenData& t = m.tokens[id];
        if (!(t.attr & kAttrControl)) {
            log->debug("{}: token {} '{}' is treated as a control token", f.path(), id, t.text);
            t.attr |= kAttrControl;
        }
    };
    if (m.eot < 0) {
        for (const char* text : kEotTexts)
            if (const int32_t id = m.lookup(text); id >= 0) {
                m.eot = id;
                make_control(id);
                break;
            }
    }
    if (m.eom < 0) {
        if (const int32_t id = m.lookup("<|eom_id|>"); id >= 0) {
            m.eom = id;
            make_control(id);
        }
    }
    // gpt-oss: these structure tokens are always rendered.
    for (const char* text : {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"})
        if (const int32_t id = m.lookup(text); id >= 0) m.tokens[id].attr = kAttrUserDefined;

    m.eog_flag.assign(size_t(n), 0);
    for (const char* text : kEogTexts)
        if (const int32_t id = m.lookup(text); id >= 0) {
            m.eog_flag[id] = 1;
            make_control(id);
        }
    for (const int32_t id : {m.eos, m.eot, m.eom})
        if (id >= 0) m.eog_flag[id] = 1;
    // o200k_harmony / solar-open: <|end|> ends a message, not the generation.
    {
        const int32_t ret = m.lookup("<|return|>"), call = m.lookup("<|call|>"), calls = m.lookup("<|calls|>"),
                      flush = m.lookup("<|flush|>"), end = m.lookup("<|end|>");
        if (end >= 0 && m.eog_flag[end] && ((ret >= 0 && call >= 0) || (calls >= 0 && flush >= 0)) &&
            end != m.eos && end != m.eot) {
            m.eog_flag[end] = 0;
            m.tokens[end].attr = kAttrUserDefined;
        }
    }
    for (int32_t i = 0; i < n; ++i)
        if (m.eog_flag[i]) m.eog_ids.push_back(i);

    // --- special tokens, longest first
    for (int32_t i = 0; i < n; ++i)
        if (m.tokens[i].attr & (kAttrControl | kAttrUserDefined | kAttrUnknown)) m.special_tokens.push_back(i);
    std::stable_sort(m.special_tokens.begin(), m.special_tokens.end(),
                     [&](int32_t a, int32_t b) { return m.tokens[a].text.size() > m.tokens[b].text.size(); });
    for (size_t k = 0; k < m.special_tokens.size(); ++k)
        m.special_trie.insert(m.tokens[m.special_tokens[k]].text, static_cast<int32_t>(k));

    // --- per-model attribute fixes llama.cpp applies by name
    {
        const gguf::Value* gn = f.find("general.name");
        std::string name = (gn && gn->type == gguf::ValueType::STRING) ? gn->str : std::string();
        std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return char(std::tolower(c)); });
        if (name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos) {
            for (const int32_t id : m.special_tokens) m.tokens[id].attr |= kAttrRstrip;
            if (const int32_t id = m.lookup("</s>"); id >= 0) m.tokens[id].attr |= kAttrRstrip;
            for (const char* text : {"<unk>", "<s>", "<|endoftext|>"})
                if (const int32_t id = m.lookup(text); id >= 0) m.tokens[id].attr &= ~uint32_t(kAttrRstrip);
        }
        if (m.pre == "jina-v2-de" || m.pre == "jina-v2-es" || m.pre == "jina-v2-code") {
            if (const int32_t id = m.lookup("<mask>"); id >= 0) m.tokens[id].attr |= kAttrLstrip;
        }
    }

    // --- pieces
    m.pieces.resize(size_t(n));
    for (int32_t i = 0; i < n; ++i) m.pieces[i] = compute_piece(m, m.tokens[i]);

    log->debug("{}: {} vocabulary, pre '{}', {} tokens, {} merges, {} special, bos {} eos {} eot {}", f.path(),
               m.model == Model::SPM ? "SPM" : "BPE", m.pre, n, m.merges.size(), m.special_tokens.size(), m.bos,
               m.eos, m.eot);
    return v;
}

Vocab::Model Vocab::model() const { return impl_->model; }
const std::string& Vocab::pre() const { return impl_->pre; }
int32_t Vocab::n_tokens() const { return impl_->n(); }

std::vector<int32_t> Vocab::encode(std::string_view text, bool add_special, bool parse_special) const {
    const Impl& m = *impl_;
    std::vector<int32_t> out;
    out.reserve(text.size() / 3 + 4);
    if (add_special && m.add_bos) out.push_back(m.bos);
    const std::vector<Fragment> frags = partition(m, text, parse_special);
    bool prev_special = true;  // SPM: the first fragment gets the prefix space
    for (const Fragment& f : frags) {
        if (f.token >= 0) {
            out.push_back(f.token);
            prev_special = true;
            continue;
        }
        const std::string_view piece = text.substr(f.off, f.len);
        if (m.model == Model::SPM) {
            m.encode_spm(piece, m.add_space_prefix && prev_special, out);
        } else {
            m.encode_bpe(piece, out);
        }
        prev_special = false;
    }
    if (add_special && m.add_eos) out.push_back(m.eos);
    return out;
}

std::string Vocab::token_to_piece(int32_t id, bool render_special) const {
    const Impl& m = *impl_;
    if (id < 0 || id >= m.n()) {
        throw Error("token id " + std::to_string(id) + " is out of range (the vocabulary has " +
                    std::to_string(m.n()) + " tokens)");
    }
    if (!render_special && (m.tokens[id].attr & (kAttrUnknown | kAttrControl))) return {};
    return m.pieces[id];
}

const Vocab::PieceIndex& Vocab::piece_index() const {
    Impl& m = *impl_;
    std::call_once(m.piece_index_once, [&m] {
        PieceIndex& ix = m.piece_index;
        ix.pieces.resize(m.pieces.size());
        for (int32_t id = 0; id < m.n(); ++id) {
            if (m.tokens[size_t(id)].attr & (kAttrUnknown | kAttrControl)) continue;
            ix.pieces[size_t(id)] = m.pieces[size_t(id)];
            if (!m.pieces[size_t(id)].empty()) ix.sorted.push_back(id);
        }
        std::sort(ix.sorted.begin(), ix.sorted.end(),
                  [&ix](int32_t a, int32_t b) { return ix.pieces[size_t(a)] < ix.pieces[size_t(b)]; });
        for (int32_t id : ix.sorted) ix.max_len = std::max(ix.max_len, ix.pieces[size_t(id)].size());
    });
    return m.piece_index;
}

std::string Vocab::decode(const std::vector<int32_t>& ids, bool render_special) const {
    const Impl& m = *impl_;
    std::string out;
    bool remove_space = m.add_space_prefix;
    for (const int32_t id : ids) {
        const std::string piece = token_to_piece(id, render_special);
        if (remove_space && !piece.empty() && piece[0] == ' ')
            out.append(piece, 1, std::string::npos);
        else
            out += piece;
        remove_space = false;
    }
    if (m.clean_spaces) clean_up_spaces(out);
    return out;
}

std::string Vocab::pieces_text(const std::vector<int32_t>& ids, bool render_special) const {
    std::string out;
    for (const int32_t id : ids) out += token_to_piece(id, render_special);
    return out;
}

const std::string& Vocab::token_text(int32_t id) const {
    if (id < 0 || id >= impl_->n()) throw Error("token id " + std::to_string(id) + " is out of range");
    return impl_->tokens[id].text;
}

TokenType Vocab::token_type(int32_t id) const {
    if (id < 0 || id >= impl_->n()) throw Error("token id " + std::to_string(id) + " is out of range");
    return impl_->tokens[id].type;
}

float Vocab::token_score(int32_t id) const {
    if (id < 0 || id >= impl_->n()) throw Error("token id " + std::to_string(id) + " is out of range");
    return impl_->tokens[id].score;
}

bool Vocab::is_control(int32_t id) const {
    if (id < 0 || id >= impl_->n()) return false;
    return (impl_->tokens[id].attr & (kAttrControl | kAttrUnknown)) != 0;
}

int32_t Vocab::bos() const { return impl_->bos; }
int32_t Vocab::eos() const { return impl_->eos; }
int32_t Vocab::eot() const { return impl_->eot; }
int32_t Vocab::eom() const { return impl_->eom; }
int32_t Vocab::unk() const { return impl_->unk; }
int32_t Vocab::pad() const { return impl_->pad; }
bool Vocab::add_bos() const { return impl_->add_bos; }
bool Vocab::add_eos() const { return impl_->add_eos; }
bool Vocab::add_space_prefix() const { return impl_->add_space_prefix; }
bool Vocab::clean_spaces() const { return impl_->clean_spaces; }

bool Vocab::is_end_of_generation(int32_t id) const {
    return id >= 0 && id < impl_->n() && impl_->eog_flag[id] != 0;
}

const std::vector<int32_t>& Vocab::end_of_generation_ids() const { return impl_->eog_ids; }

std::optional<int32_t> Vocab::find(std::string_view token_text) const {
    const int32_t id = impl_->lookup(token_text);
    if (id < 0) return std::nullopt;
    return id;
}

// --- StreamDecoder

StreamDecoder::StreamDecoder(const Vocab& vocab, bool render_special)
    : vocab_(vocab), render_special_(render_special) {}

std::string StreamDecoder::push(int32_t id) {
    pending_ += vocab_.token_to_piece(id, render_special_);
    return drain(false);
}

std::string StreamDecoder::push(int32_t id, bool render) {
    pending_ += vocab_.token_to_piece(id, render_special_ || render);
    return drain(false);
}

std::string StreamDecoder::flush() { return drain(true); }

std::string StreamDecoder::drain(bool final) {
    static constexpr std::string_view kFffd = "\xEF\xBF\xBD";
    std::string out;
    size_t i = 0;
    while (i < pending_.size()) {
        const int k = uni::classify_strict(pending_, i);
        if (k > 0) {
            out.append(pending_, i, size_t(k));
            i += size_t(k);
        } else if (k < 0) {
            out += kFffd;
            i += size_t(-k);
        } else if (final) {
            out += kFffd;  // an unfinished character at the very end
            i = pending_.size();
        } else {
            break;  // wait for the rest of this character
        }
    }
    pending_.erase(0, i);
    return out;
}

}  // namespace strata::tok
