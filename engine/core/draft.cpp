#include "core/draft.h"

#include <sstream>

#include "common/error.h"
#include "sched/speculative.h"

namespace strata::core {

DraftSpec DraftSpec::parse(const std::string& s) {
    DraftSpec d;
    if (s.empty() || s == "off") return d;
    if (s == "mtp") {
        d.kind = Kind::Mtp;
        return d;
    }
    if (s.rfind("self", 0) != 0) {
        d.kind = Kind::File;
        d.path = s;
        return d;
    }
    d.kind = Kind::Self;
    if (s.size() > 4 && s[4] != ':') throw Error("the draft: expected 'mtp', 'self:layers=N,experts=K' or a GGUF path, got '" + s + "'");
    std::stringstream ss(s.size() > 5 ? s.substr(5) : "");
    for (std::string item; std::getline(ss, item, ',');) {
        if (item == "resident") {
            d.resident = true;
            continue;
        }
        const auto eq = item.find('=');
        const std::string key = item.substr(0, eq);
        int64_t val = 0;
        try {
            val = eq == std::string::npos ? -1 : std::stoll(item.substr(eq + 1));
        } catch (...) {
            val = -1;
        }
        if (key == "layers" && val > 0) d.layers = val;
        else if (key == "experts" && val > 0) d.experts = val;
        else throw Error("the draft: '" + item + "' is not layers=N, experts=K (N, K >= 1) or resident");
    }
    if (d.layers == 0 && d.experts == 0 && !d.resident)
        throw Error("a self-draft: give layers=N, experts=K (fewer than the target's) and/or resident");
    return d;
}

std::string DraftSpec::key() const {
    switch (kind) {
        case Kind::Off: return "off";
        case Kind::Mtp: return "mtp";
        case Kind::File: return "file:" + path;
        case Kind::Self:
            return "self:" + std::to_string(layers) + "," + std::to_string(experts) + (resident ? ",resident" : "");
    }
    return "";
}

Draft make_draft(const DraftSpec& d, Engine& engine, int threads) {
    Draft out;
    model::ContextParams dp;
    dp.n_ctx = engine.context().n_ctx();
    dp.n_threads = threads;
    dp.pool = engine.context().thread_pool();  // the draft runs between the target's steps: on its workers
    const model::ModelConfig& c = engine.model().config();
    switch (d.kind) {
        case DraftSpec::Kind::Off: throw Error("internal: a draft was made for no speculative decoding");
        case DraftSpec::Kind::Mtp:
            // The block runs on the CPU, from the hidden rows the target returns (on a GPU too).
            out.drafter = std::make_unique<sched::MtpDrafter>(engine.model(), dp);
            return out;
        case DraftSpec::Kind::Self:
            if (d.layers >= c.n_layer)
                throw Error("a self-draft of " + std::to_string(d.layers) + " layers: the model has " +
                            std::to_string(c.n_layer) + "; a draft needs fewer");
            if (d.experts > 0 && c.n_expert_used > 0 && d.experts >= c.n_expert_used)
                throw Error("a self-draft with " + std::to_string(d.experts) + " experts a token: the model routes to " +
                            std::to_string(c.n_expert_used) + "; a draft needs fewer");
            dp.max_layers = d.layers;
            dp.n_expert_used = d.experts;
            dp.resident_experts_only = d.resident;
            // The engine's own (resident or cached) weights; its expert lookups do
            // not count as the model's (hit rate, policy).
            if (engine.expert_store()) out.experts = std::make_unique<experts::DraftExperts>(*engine.expert_store());
            out.ctx = std::make_unique<model::Context>(engine.model(), dp, &engine.context().weights(), out.experts.get());
            out.drafter = std::make_unique<sched::ContextDrafter>(*out.ctx);
            return out;
        case DraftSpec::Kind::File:
            out.model = model::Model::load(d.path);
            if (const std::string why = sched::vocab_mismatch(engine.vocab(), out.model->vocab()); !why.empty())
                throw Error(d.path + ": " + why + "; a draft must share the target's vocabulary");
            out.ctx = std::make_unique<model::Context>(*out.model, dp);
            out.drafter = std::make_unique<sched::ContextDrafter>(*out.ctx);
            return out;
    }
    return out;
}

}  // namespace strata::core
