#include <cstdio>

#include "commands.h"
#include "common.h"
#include "gguf/gguf.h"
#include "tokenizer/vocab.h"

namespace strata::cli {

int cmd_tokenize(int argc, char** argv) {
    Args a("tokenize", "MODEL TEXT", "Prints the token ids and pieces of TEXT (a model or a vocabulary-only GGUF file).");
    a.positional("MODEL", "a GGUF model or vocabulary file");
    a.positional("TEXT", "the text to tokenize");
    a.flag("--no-special", "do not add BOS/EOS as the model's metadata asks");
    a.flag("--parse-special", "text spelling a control token (e.g. <s>) becomes that token");
    a.flag("--ids", "print only the ids, on one line");
    if (!a.parse(argc, argv, 2)) return 0;

    auto file = gguf::File::open(a.pos("MODEL"));
    auto vocab = tok::Vocab::from_gguf(*file);
    const auto ids = vocab->encode(a.pos("TEXT"), !a.flag_set("--no-special"), a.flag_set("--parse-special"));
    if (a.flag_set("--ids")) {
        for (size_t i = 0; i < ids.size(); ++i) std::printf("%s%d", i ? " " : "", ids[i]);
        std::printf("\n");
        return 0;
    }
    for (int32_t id : ids) {
        std::printf("%8d  '%s'  %s\n", id, json_escape(vocab->token_to_piece(id, true)).c_str(),
                    vocab->token_text(id).c_str());
    }
    std::printf("%zu tokens\n", ids.size());
    return 0;
}

}  // namespace strata::cli
