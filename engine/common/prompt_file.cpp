#include "common/prompt_file.h"

#include <fstream>

#include "common/error.h"

namespace strata {

std::vector<std::string> read_prompt_file(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw Error(path + ": cannot open the prompt file");
    std::vector<std::string> prompts;
    for (std::string line; std::getline(in, line);) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.empty()) continue;
        std::string p;
        for (size_t i = 0; i < line.size(); ++i) {
            if (line[i] == '\\' && i + 1 < line.size() && line[i + 1] == 'n') {
                p += '\n';
                ++i;
            } else {
                p += line[i];
            }
        }
        prompts.push_back(std::move(p));
    }
    if (prompts.empty()) throw Error(path + ": no prompts (the file has no non-empty line)");
    return prompts;
}

}  // namespace strata
