#include "bench_serving.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <chrono>
#include <cstdio>
#include <sstream>

#include "common.h"
#include "common/error.h"
#include "core/engine.h"
#include "sched/scheduler.h"
#include "sched/speculative.h"
#include "draft.h"

namespace strata::cli {

namespace {

using Clock = std::chrono::steady_clock;

double percentile(std::vector<double> v, double q) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    const size_t i = static_cast<size_t>(std::min<double>(v.size() - 1, std::ceil(q * v.size()) - 1));
    return v[std::max<size_t>(i, 0)];
}

std::vector<int32_t> prompt_at(const std::vector<int32_t>& stream, size_t offset, int64_t len, int32_t bos) {
    std::vector<int32_t> p;
    if (bos >= 0) p.push_back(bos);
    for (size_t i = 0; static_cast<int64_t>(p.size()) < len; ++i) p.push_back(stream[(offset + i) % stream.size()]);
    return p;
}

}  // namespace

void add_serving_options(Args& a) {
    a.option("--concurrency", "", "C", "serving benchmark: requests in flight at once (continuous batching)");
    a.option("--requests", "", "R", "serving benchmark: requests in all (default 4 x concurrency)");
    a.option("--gen-len", "", "G", "serving benchmark: tokens generated per request (end-of-text ignored)", "64");
    a.option("--group", "", "on|off", "serving: admit requests by predicted expert overlap", "on");
    a.option("--arrival", "", "closed|burst", "serving: keep C in flight (closed) or queue all R at once (burst)", "closed");
    add_draft_options(a);
}

bool wants_serving(const Args& a) { return a.has("--concurrency") || a.has("--draft"); }

int bench_serving(const Args& a, EngineSettings settings, double read_gbs, const std::string& text) {
    const int64_t conc = a.has("--concurrency") ? a.integer("--concurrency", 1, 4096) : 1;
    const int64_t n_req = a.has("--requests") ? a.integer("--requests", 1, 1 << 20) : 4 * conc;
    const int64_t plen = a.integer("--prompt-len", 1, 1 << 20);
    const int64_t glen = a.integer("--gen-len", 1, 1 << 20);
    const std::string group = a.str("--group");
    if (group != "on" && group != "off") throw UsageError("--group: expected on or off, got '" + group + "'");
    const std::string arrival = a.str("--arrival");
    if (arrival != "closed" && arrival != "burst") throw UsageError("--arrival: expected closed or burst, got '" + arrival + "'");
    const bool spec = a.has("--draft");
    if (spec && conc != 1) throw UsageError("--draft runs requests one at a time: use --concurrency 1 (or omit it)");
    // A routing trace replays one sequence after another (experts/trace.h);
    // requests decoded side by side would interleave theirs.
    if (conc != 1 && !settings.trace_file.empty())
        throw UsageError("--trace records one sequence at a time: use --concurrency 1 with --trace");
    // A KV pool that holds every request in flight, unless the user sized it.
    if (settings.kv_tokens == 0) settings.kv_tokens = conc * (plen + glen + 1);
    auto engine = core::Engine::load(a.pos("MODEL"), settings);
    model::Context& ctx = engine->context();
    if (plen + glen + 1 > ctx.n_ctx())
        throw UsageError("--prompt-len + --gen-len = " + std::to_string(plen + glen) + " exceeds the context of " +
                         std::to_string(ctx.n_ctx()) + " tokens (use --ctx, or fewer tokens)");
    const tok::Vocab& vocab = engine->vocab();
    std::vector<int32_t> stream = vocab.encode(text, false);
    if (stream.empty()) throw UsageError("the prompt text is empty");
    const int32_t bos = vocab.add_bos() ? vocab.bos() : -1;

    sched::SamplingParams sp;
    sp.temperature = static_cast<float>(a.number("--temp", 0.0, 100.0));
    sp.seed = static_cast<uint64_t>(a.integer("--seed", 0, INT64_MAX));
    sp.max_tokens = static_cast<int32_t>(glen);
    sp.ignore_eos = true;

    if (auto* store = engine->expert_store(); store && store->slots() >= store->experts_total()) {
        store->fill_free_slots();
        engine->wait_idle();
    }
    // Warm-up: one short request.
    {
        sched::SamplingParams w = sp;
        w.max_tokens = 8;
        sched::generate(ctx, vocab, w, prompt_at(stream, 0, std::min<int64_t>(plen, 16), bos));
        engine->wait_idle();
        ctx.clear();
    }
    experts::ExpertStoreStats s0{}, s1{};
    if (auto* store = engine->expert_store()) s0 = store->stats();

    std::vector<double> ttft, itl;
    int64_t generated = 0, forwarded = 0, steps = 0, preemptions = 0;
    sched::SpeculativeStats spec_total;
    const auto t0 = Clock::now();
    if (!spec) {
        sched::SchedulerConfig sc;
        sc.max_batch = static_cast<int>(conc);
        sc.group_by_experts = group == "on";
        sc.prefix_sharing = false;  // distinct prompts; sharing is measured by the tests
        sched::Scheduler sch(ctx, vocab, sc);
        int64_t submitted = 0;
        std::function<void(const sched::RequestResult&)> done;
        auto submit_next = [&] {
            const size_t off = static_cast<size_t>(submitted * 37);
            sched::SamplingParams p = sp;
            p.seed = sp.seed + static_cast<uint64_t>(submitted);
            sch.submit(prompt_at(stream, off, plen, bos), p, 0, {}, done);
            ++submitted;
        };
        done = [&](const sched::RequestResult& r) {
            ttft.push_back(r.ttft_s * 1e3);
            for (double g : r.itl_s) itl.push_back(g * 1e3);
            generated += static_cast<int64_t>(r.tokens.size());
            if (submitted < n_req) submit_next();
        };
        const int64_t first_wave = arrival == "burst" ? n_req : std::min(conc, n_req);
        for (int64_t i = 0; i < first_wave; ++i) submit_next();
        sch.run();
        forwarded = sch.stats().tokens_forwarded;
        steps = sch.stats().steps;
        preemptions = sch.stats().preemptions;
    } else {
        const int k = static_cast<int>(a.integer("--spec-k", 1, 32));
        Draft draft_holder = make_draft(a.str("--draft"), *engine, settings.threads);
        sched::Drafter& draft = *draft_holder.drafter;
        sched::SpeculativeParams sparams;
        sparams.k = k;
        sparams.k_max = std::max(2 * k, 1);
        sparams.p_min = static_cast<float>(a.number("--spec-p-min", 0, 1));
        for (int64_t i = 0; i < n_req; ++i) {
            ctx.clear();
            if (draft_holder.ctx) draft_holder.ctx->clear();
            sched::SamplingParams p = sp;
            p.seed = sp.seed + static_cast<uint64_t>(i);
            const auto req_t0 = Clock::now();
            auto last = req_t0;
            bool first = true;
            sched::SpeculativeStats st;
            const auto r = sched::generate_speculative(
                ctx, draft, vocab, p, prompt_at(stream, static_cast<size_t>(i * 37), plen, bos), sparams, &st,
                [&](std::string_view) {
                    const auto now = Clock::now();
                    if (first) ttft.push_back(std::chrono::duration<double, std::milli>(now - req_t0).count());
                    else itl.push_back(std::chrono::duration<double, std::milli>(now - last).count());
                    first = false;
                    last = now;
                    return true;
                });
            generated += static_cast<int64_t>(r.tokens.size());
            forwarded += plen + static_cast<int64_t>(r.tokens.size());
            steps += st.rounds;
            spec_total.rounds += st.rounds;
            spec_total.drafted += st.drafted;
            spec_total.accepted += st.accepted;
        }
    }
    const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
    if (auto* store = engine->expert_store()) s1 = store->stats();
    const double loaded = static_cast<double>(s1.bytes_loaded - s0.bytes_loaded);
    const uint64_t demanded = s1.demanded - s0.demanded;
    auto* store = engine->expert_store();

    std::ostringstream js;
    js.precision(6);
    js << "{\"model\": \"" << json_escape(a.pos("MODEL")) << "\", \"mode\": \"" << (spec ? "speculative" : "batched")
       << "\", \"arrival\": \"" << arrival << "\", \"concurrency\": " << conc << ", \"requests\": " << n_req << ", \"prompt_len\": " << plen
       << ", \"gen_len\": " << glen << ", \"threads\": " << settings.threads << ", \"machine_read_gbs\": " << read_gbs
       << ", \"throughput_tok_s\": " << generated / wall << ", \"tokens_generated\": " << generated
       << ", \"tokens_forwarded\": " << forwarded << ", \"forward_passes\": " << steps
       << ", \"mean_tokens_per_pass\": " << (steps ? double(forwarded) / steps : 0.0)
       << ", \"ttft_ms_p50\": " << percentile(ttft, 0.5) << ", \"ttft_ms_p99\": " << percentile(ttft, 0.99)
       << ", \"itl_ms_p50\": " << percentile(itl, 0.5) << ", \"itl_ms_p99\": " << percentile(itl, 0.99)
       << ", \"preemptions\": " << preemptions
       << ", \"spec_acceptance\": " << (spec ? spec_total.acceptance() : 0.0)
       << ", \"spec_tokens_per_pass\": " << (spec && spec_total.rounds ? double(generated - n_req) / spec_total.rounds : 0.0)
       << ", \"expert_slots\": " << (store ? store->slots() : 0)
       << ", \"experts_total\": " << (store ? store->experts_total() : 0)
       << ", \"expert_hit_rate\": " << (demanded ? double(s1.hits - s0.hits) / double(demanded) : 1.0)
       << ", \"expert_bytes_loaded_per_token\": " << (generated ? loaded / generated : 0.0)
       << ", \"kv_type\": \"" << settings.kv_type << "\", \"kv_tokens\": " << settings.kv_tokens << "}";
    if (a.flag_set("--json")) {
        std::printf("%s\n", js.str().c_str());
        return 0;
    }
    std::printf("mode                %s, concurrency %lld, %lld requests of %lld + %lld tokens\n",
                spec ? "speculative" : "batched", static_cast<long long>(conc), static_cast<long long>(n_req),
                static_cast<long long>(plen), static_cast<long long>(glen));
    std::printf("throughput          %.1f tok/s generated (%.1f tokens per forward pass)\n", generated / wall,
                steps ? double(forwarded) / steps : 0.0);
    std::printf("time to first token p50 %.1f ms, p99 %.1f ms\n", percentile(ttft, 0.5), percentile(ttft, 0.99));
    std::printf("inter-token latency p50 %.2f ms, p99 %.2f ms\n", percentile(itl, 0.5), percentile(itl, 0.99));
    if (spec) std::printf("draft acceptance    %.1f%%\n", 100.0 * spec_total.acceptance());
    if (store)
        std::printf("experts             %s loaded per generated token\n",
                    human_bytes(static_cast<uint64_t>(generated ? loaded / generated : 0.0)).c_str());
    return 0;
}

}  // namespace strata::cli
