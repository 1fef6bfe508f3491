#include "args.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace strata::cli {

Args::Args(std::string command, std::string synopsis, std::string description)
    : command_(std::move(command)), synopsis_(std::move(synopsis)), description_(std::move(description)) {}

void Args::option(const std::string& name, const std::string& short_name, const std::string& value_name,
                  const std::string& help, std::optional<std::string> fallback) {
    opts_.push_back({name, short_name, value_name, help, std::move(fallback), true, false});
}

void Args::multi_option(const std::string& name, const std::string& value_name, const std::string& help) {
    opts_.push_back({name, "", value_name, help, std::nullopt, true, true});
}

void Args::flag(const std::string& name, const std::string& help) {
    opts_.push_back({name, "", "", help, std::nullopt, false, false});
}

void Args::positional(const std::string& name, const std::string& help, bool required) {
    pos_decl_.push_back({name, help, required});
}

const Args::Opt* Args::find(const std::string& token) const {
    for (const Opt& o : opts_)
        if (token == o.name || (!o.short_name.empty() && token == o.short_name)) return &o;
    return nullptr;
}

bool Args::parse(int argc, char** argv, int first) {
    size_t next_pos = 0;
    for (int i = first; i < argc; ++i) {
        std::string tok = argv[i];
        if (tok == "--help" || tok == "-h") {
            std::fputs(help().c_str(), stdout);
            return false;
        }
        if (tok.size() > 1 && tok[0] == '-' && !(tok.size() > 1 && (std::isdigit(static_cast<unsigned char>(tok[1])) || tok[1] == '.'))) {
            std::string value;
            bool inline_value = false;
            if (const size_t eq = tok.find('='); tok.rfind("--", 0) == 0 && eq != std::string::npos) {
                value = tok.substr(eq + 1);
                tok = tok.substr(0, eq);
                inline_value = true;
            }
            const Opt* o = find(tok);
            if (!o) throw UsageError("unknown option '" + tok + "' for '" + command_ + "' (see strata-cli " + command_ + " --help)");
            if (!o->takes_value) {
                if (inline_value) throw UsageError("option '" + tok + "' takes no value");
                values_[o->name].push_back("1");
                continue;
            }
            if (!inline_value) {
                if (i + 1 >= argc) throw UsageError("option '" + tok + "' needs a value: " + o->value_name);
                value = argv[++i];
            }
            if (!o->multi && values_.count(o->name)) throw UsageError("option '" + o->name + "' given twice");
            values_[o->name].push_back(value);
            continue;
        }
        if (next_pos >= pos_decl_.size()) throw UsageError("unexpected argument '" + tok + "' (see strata-cli " + command_ + " --help)");
        pos_values_[pos_decl_[next_pos++].name] = tok;
    }
    for (; next_pos < pos_decl_.size(); ++next_pos)
        if (pos_decl_[next_pos].required)
            throw UsageError("missing " + pos_decl_[next_pos].name + " (usage: strata-cli " + command_ + " " + synopsis_ + ")");
    return true;
}

bool Args::has(const std::string& name) const { return values_.count(name) > 0; }

std::string Args::str(const std::string& name) const {
    if (auto it = values_.find(name); it != values_.end()) return it->second.back();
    for (const Opt& o : opts_)
        if (o.name == name && o.fallback) return *o.fallback;
    throw UsageError("missing required option " + name);
}

std::vector<std::string> Args::all(const std::string& name) const {
    auto it = values_.find(name);
    return it == values_.end() ? std::vector<std::string>{} : it->second;
}

int64_t Args::integer(const std::string& name, int64_t min, int64_t max) const {
    const std::string s = str(name);
    size_t used = 0;
    long long v = 0;
    try {
        v = std::stoll(s, &used, 10);
    } catch (...) {
        used = 0;
    }
    if (used != s.size() || s.empty()) throw UsageError("option " + name + ": '" + s + "' is not an integer");
    if (v < min || v > max) {
        throw UsageError("option " + name + ": " + s + " is out of range (expected " + std::to_string(min) + ".." +
                         std::to_string(max) + ")");
    }
    return v;
}

double Args::number(const std::string& name, double min, double max) const {
    const std::string s = str(name);
    size_t used = 0;
    double v = 0;
    try {
        v = std::stod(s, &used);
    } catch (...) {
        used = 0;
    }
    if (used != s.size() || s.empty() || !std::isfinite(v)) throw UsageError("option " + name + ": '" + s + "' is not a number");
    if (v < min || v > max) {
        std::ostringstream os;
        os << "option " << name << ": " << s << " is out of range (expected " << min << " .. " << max << ")";
        throw UsageError(os.str());
    }
    return v;
}

std::string Args::pos(const std::string& name) const {
    auto it = pos_values_.find(name);
    return it == pos_values_.end() ? std::string() : it->second;
}

std::string Args::help() const {
    std::ostringstream os;
    os << "usage: strata-cli " << command_ << " " << synopsis_ << "\n\n" << description_ << "\n";
    if (!pos_decl_.empty()) {
        os << "\narguments:\n";
        for (const Pos& p : pos_decl_) os << "  " << p.name << std::string(p.name.size() < 24 ? 24 - p.name.size() : 1, ' ') << p.help << "\n";
    }
    os << "\noptions:\n";
    for (const Opt& o : opts_) {
        std::string left = o.name;
        if (!o.short_name.empty()) left = o.short_name + ", " + left;
        if (o.takes_value) left += " " + o.value_name;
        os << "  " << left << std::string(left.size() < 24 ? 24 - left.size() : 1, ' ') << o.help;
        if (o.fallback) os << " (default: " << *o.fallback << ")";
        if (o.multi) os << " (repeatable)";
        os << "\n";
    }
    os << "  -h, --help              this help\n";
    return os.str();
}

uint64_t parse_size(const std::string& text, const std::string& what) {
    size_t used = 0;
    double v = 0;
    try {
        v = std::stod(text, &used);
    } catch (...) {
        used = 0;
    }
    if (used == 0 || !(v >= 0)) throw UsageError(what + ": '" + text + "' is not a size (examples: 512M, 4G, 1.5GiB)");
    std::string unit = text.substr(used);
    for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    double mul = 1;
    if (unit.empty() || unit == "B") mul = 1;
    else if (unit == "K" || unit == "KB" || unit == "KIB") mul = 1024.0;
    else if (unit == "M" || unit == "MB" || unit == "MIB") mul = 1024.0 * 1024;
    else if (unit == "G" || unit == "GB" || unit == "GIB") mul = 1024.0 * 1024 * 1024;
    else if (unit == "T" || unit == "TB" || unit == "TIB") mul = 1024.0 * 1024 * 1024 * 1024;
    else throw UsageError(what + ": unknown unit '" + unit + "' in '" + text + "' (use K, M, G or T)");
    return static_cast<uint64_t>(v * mul);
}

}  // namespace strata::cli
