#include "draft.h"

#include <sstream>

#include "args.h"
#include "common/error.h"
#include "sched/speculative.h"

namespace strata::cli {

namespace {

// What --draft says: a file, or the target with fewer layers / experts.
struct DraftSpec {
    bool mtp = false;
    bool self = false;
    std::string path;
    int64_t layers = 0, experts = 0;
    bool resident = false;  // route only among experts already in fast memory
};

DraftSpec parse_draft(const std::string& s) {
    DraftSpec d;
    if (s == "mtp") {
        d.mtp = true;
        return d;
    }
    if (s.rfind("self", 0) != 0) {
        d.path = s;
        return d;
    }
    d.self = true;
    std::string rest = s.size() > 5 ? s.substr(5) : "";
    if (s.size() > 4 && s[4] != ':') throw UsageError("--draft: expected 'mtp', 'self:layers=N,experts=K' or a GGUF path, got '" + s + "'");
    std::stringstream ss(rest);
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
        else throw UsageError("--draft: '" + item + "' is not layers=N, experts=K (N, K >= 1) or resident");
    }
    if (d.layers == 0 && d.experts == 0 && !d.resident)
        throw UsageError("--draft self: give layers=N, experts=K (fewer than the target's) and/or resident");
    return d;
}

}  // namespace

Draft make_draft(const std::string& spec, core::Engine& engine, int threads) {
    const DraftSpec d = parse_draft(spec);
    Draft out;
    model::ContextParams dp;
    dp.n_ctx = engine.context().n_ctx();
    dp.n_threads = threads;
    dp.pool = engine.context().thread_pool();  // the draft runs between the target's steps: on its workers
    if (d.mtp) {
        if (engine.context().device())
            throw Error("--draft mtp runs the MTP block on the CPU, and this model computes on " +
                        engine.context().device()->name() + "; use --device cpu or another draft");
        out.drafter = std::make_unique<sched::MtpDrafter>(engine.model(), dp);
        return out;
    }
    if (d.self) {
        dp.max_layers = d.layers;
        dp.n_expert_used = d.experts;
        dp.resident_experts_only = d.resident;
        // The engine's own (resident or cached) weights; its expert lookups do
        // not count as the model's (hit rate, policy).
        if (engine.expert_store()) out.experts = std::make_unique<experts::DraftExperts>(*engine.expert_store());
        out.ctx = std::make_unique<model::Context>(engine.model(), dp, &engine.context().weights(), out.experts.get());
        out.drafter = std::make_unique<sched::ContextDrafter>(*out.ctx);
        return out;
    }
    out.model = model::Model::load(d.path);
    if (const std::string why = sched::vocab_mismatch(engine.vocab(), out.model->vocab()); !why.empty())
        throw Error("--draft " + d.path + ": " + why + "; the draft must share the target's vocabulary");
    out.ctx = std::make_unique<model::Context>(*out.model, dp);
    out.drafter = std::make_unique<sched::ContextDrafter>(*out.ctx);
    return out;
}

}  // namespace strata::cli
