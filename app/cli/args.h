// A small, strict command-line parser for strata-cli: every option is declared
// with its help text, unknown options and missing or malformed values are
// errors with one clear line, and --help prints the declared options.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace strata::cli {

class UsageError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

class Args {
public:
    Args(std::string command, std::string synopsis, std::string description);

    // Declares an option taking a value ("--top-k", "-k"); `short_name` may be empty.
    void option(const std::string& name, const std::string& short_name, const std::string& value_name,
                const std::string& help, std::optional<std::string> fallback = std::nullopt);
    // Declares a repeatable option (each occurrence adds a value).
    void multi_option(const std::string& name, const std::string& value_name, const std::string& help);
    void flag(const std::string& name, const std::string& help);
    void positional(const std::string& name, const std::string& help, bool required = true);

    // Returns false when --help was given (help already printed). Throws UsageError.
    bool parse(int argc, char** argv, int first);

    bool has(const std::string& name) const;
    bool flag_set(const std::string& name) const { return has(name); }
    std::string str(const std::string& name) const;  // value or fallback; throws if neither
    std::vector<std::string> all(const std::string& name) const;
    int64_t integer(const std::string& name, int64_t min, int64_t max) const;
    double number(const std::string& name, double min, double max) const;
    std::string pos(const std::string& name) const;  // "" when an optional positional is absent

    std::string help() const;

private:
    struct Opt {
        std::string name, short_name, value_name, help;
        std::optional<std::string> fallback;
        bool takes_value = true;
        bool multi = false;
    };
    struct Pos {
        std::string name, help;
        bool required;
    };
    const Opt* find(const std::string& token) const;

    std::string command_, synopsis_, description_;
    std::vector<Opt> opts_;
    std::vector<Pos> pos_decl_;
    std::map<std::string, std::vector<std::string>> values_;
    std::map<std::string, std::string> pos_values_;
};

// Parses sizes like "512M", "4G", "1.5GiB", "100000" (bytes).
uint64_t parse_size(const std::string& text, const std::string& what);

}  // namespace strata::cli
