// A loaded model: the mapped GGUF file, its hyper-parameters, its bound
// weights and its vocabulary. Immutable after load and shared by every
// Context (sequence state) that runs it.
#pragma once

#include <memory>
#include <string>

#include "gguf/gguf.h"
#include "model/config.h"
#include "model/weights.h"
#include "tokenizer/vocab.h"

namespace strata::model {

class Model {
public:
    // Opens, validates and binds. Throws strata::Error with the file name and
    // what is wrong. `random_access`: the caller reads weights through other
    // means (O_DIRECT), so the mapping is advised not to read ahead.
    static std::unique_ptr<Model> load(const std::string& path, bool random_access = false);

    const ModelConfig& config() const { return config_; }
    const ModelWeights& weights() const { return weights_; }
    const tok::Vocab& vocab() const { return *vocab_; }
    const gguf::File& file() const { return *file_; }

    // The file's first NextN/MTP block as a model of its own (null where the
    // file has none): one attention layer whose forward pass starts by mixing
    // each token's embedding with the trunk's hidden row (ModelWeights::
    // nextn_input) and ends with the block's head, for a Context that drafts
    // (sched::MtpDrafter). It shares this model's file and vocabulary.
    const Model* nextn() const { return nextn_.get(); }

    // Parameter and byte counts (all layers; "active" counts only the experts a
    // token is routed to, plus the shared weights every token reads).
    struct Sizes {
        int64_t params_total = 0;
        int64_t params_active = 0;
        uint64_t bytes_total = 0;
        uint64_t bytes_active = 0;     // weight bytes one decoded token reads
        uint64_t bytes_experts = 0;    // all routed experts
        uint64_t bytes_per_expert = 0; // one expert of one layer (gate+up+down), mean over layers
    };
    Sizes sizes() const;

private:
    Model() = default;
    void make_nextn_view();
    std::shared_ptr<gguf::File> file_;
    ModelConfig config_;
    ModelWeights weights_;
    std::shared_ptr<tok::Vocab> vocab_;
    std::unique_ptr<Model> nextn_;
};

}  // namespace strata::model
