#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "bench_serving.h"
#include "backend/device.h"
#include "commands.h"
#include "quant/recipe.h"
#include "common.h"
#include "common/error.h"
#include "core/bandwidth.h"
#include "core/engine.h"
#include "kernels/dispatch.h"
#include "sched/sampler.h"

namespace strata::cli {

namespace {

// Public-domain text (the opening of Genesis, KJV) for prompts when none is given.
const char* kDefaultText =
    "In the beginning God created the heaven and the earth. And the earth was without form, and void; and "
    "darkness was upon the face of the deep. And the Spirit of God moved upon the face of the waters. And God "
    "said, Let there be light: and there was light. And God saw the light, that it was good: and God divided the "
    "light from the darkness. And God called the light Day, and the darkness he called Night. And the evening and "
    "the morning were the first day. And God said, Let there be a firmament in the midst of the waters, and let it "
    "divide the waters from the waters.";

uint64_t peak_rss_bytes() {
    std::ifstream in("/proc/self/status");
    for (std::string line; std::getline(in, line);)
        if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
    return 0;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// One thread's decode time by what it did (seconds), from a DecodeProfile.
struct ThreadShares {
    double quant_s = 0, quant_gbs = 0, f32_s = 0, attention_s = 0, waiting_s = 0, other_s = 0, outside_s = 0;
    double end_wait_s = 0;  // thread 0: its part of outside_s spent waiting for the workers at the regions' ends
};
struct ProfileSummary {
    std::vector<ThreadShares> threads;
    double quant_gbs = 0;  // the threads' quantized-weight rates added up: the stream while all are in kernels
};

ProfileSummary summarize(const model::DecodeProfile& p, double decode_s) {
    using P = model::DecodeProfile;
    ProfileSummary s;
    for (const P::Thread& t : p.threads) {
        ThreadShares x;
        x.quant_s = t.seconds[P::QuantWeights];
        x.f32_s = t.seconds[P::F32Weights];
        x.attention_s = t.seconds[P::Attention];
        x.waiting_s = t.seconds[P::Waiting];
        x.quant_gbs = x.quant_s > 0 ? static_cast<double>(t.bytes[P::QuantWeights]) / x.quant_s / 1e9 : 0.0;
        x.other_s = std::max(0.0, t.in_regions - x.quant_s - x.f32_s - x.attention_s - x.waiting_s);
        x.outside_s = std::max(0.0, decode_s - t.in_regions);
        x.end_wait_s = std::min(x.outside_s, t.region_end_wait);
        s.quant_gbs += x.quant_gbs;
        s.threads.push_back(x);
    }
    return s;
}

}  // namespace

int cmd_bench(int argc, char** argv) {
    Args a("bench", "MODEL [engine options] [-n N] [--prompt-len P] [--json]",
           "Measures prefill and decode speed and the expert cache under the given settings, in one run:\n"
           "the machine's memory read bandwidth (the roofline), a warm-up pass, a prefill of P prompt tokens,\n"
           "then N decode steps (greedy, or sampled with --temp). Expert figures cover the decode steps only.\n"
           "roofline_fraction = active weight bytes per token x decode tok/s / measured read bandwidth (the\n"
           "fastest single pass of six read loops with full-width loads, in a measurement before the model\n"
           "loads and one right after the decode).\n"
           "roofline_fraction_sustained: the same against machine_read_sustained_gbs, the fastest loop's rate\n"
           "over all its passes (the mean of the two measurements): on a shared host, whose bandwidth moves\n"
           "from pass to pass, what a decode that runs for longer than a pass can expect.\n"
           "kernel_stream_gbs = what the weight kernel alone streams over a large buffer of the model's bulk\n"
           "weight type on the same threads (no forward pass; for a MoE read once, two streams a thread, as\n"
           "decode reads an expert's gate and up),\n"
           "measured after the decode.\n"
           "kernel_tuning: the CPU kernels' knobs picked at load (engine/core/kernel_tuning.h): 512- or 256-bit\n"
           "loops, prefetch distance, read-once loops, rows per chunk; measured or cached, with the rates.\n"
           "--profile adds where each compute thread's decode time went: quantized and f32 weight products\n"
           "(with the GB/s the quantized ones streamed while they ran), the attention over the KV cache, the\n"
           "time spent spinning inside a region until another thread has done its part, the rest of the\n"
           "parallel regions (norms, RoPE, SiLU, quantizing) and time outside them; thread 0's outside time is\n"
           "split into its waits for the other threads at the regions' ends and serial work (routing,\n"
           "residuals and norms between regions, the benchmark's own sampling); other threads' is idle.\n"
           "With --concurrency C (or --draft D): the serving benchmark instead: R requests of P prompt and G\n"
           "generated tokens, C at a time through continuous batching (or one at a time through speculative\n"
           "decoding), reporting throughput, time to first token, inter-token latency and expert bytes per token.");
    a.positional("MODEL", "a GGUF model file");
    a.option("--n-predict", "-n", "N", "decode steps", "64");
    a.option("--prompt-len", "", "P", "prompt tokens for the prefill measurement", "64");
    a.option("--prompt", "-p", "TEXT", "text the prompt is cut from (default: a public-domain passage)");
    a.option("--warmup", "", "N", "decode steps before measuring (fills the cache)", "16");
    a.option("--temp", "", "T", "decode sampling temperature (0: greedy); sampled text routes like real use", "0");
    a.option("--seed", "", "S", "sampling seed", "42");
    a.flag("--json", "print one JSON object");
    a.flag("--profile", "also report where each thread's decode time went (see above)");
    add_engine_options(a);
    add_serving_options(a);
    if (!a.parse(argc, argv, 2)) return 0;
    const int64_t n_decode = a.integer("--n-predict", 1, 1 << 20);
    const int64_t prompt_len = a.integer("--prompt-len", 1, 1 << 20);
    const int64_t warmup = a.integer("--warmup", 0, 1 << 20);
    EngineSettings settings = engine_settings(a);
    // 0 means every core; resolved here once so every figure names the count.
    if (settings.threads <= 0) settings.threads = static_cast<int>(std::thread::hardware_concurrency());
    const int threads = settings.threads;
    sched::SamplingParams sp;
    sp.temperature = static_cast<float>(a.number("--temp", 0.0, 100.0));
    sp.seed = static_cast<uint64_t>(a.integer("--seed", 0, INT64_MAX));
    sp.top_k = 0;
    sp.top_p = 1.0f;
    sp.min_p = 0.0f;

    const core::ReadBandwidth before = core::measure_read_bandwidth(threads);
    double read_gbs = before.peak_gbs;
    // The bandwidth buffer is gone; restart the peak-RSS count (Linux >= 4.0) so
    // peak_rss_bytes describes the engine, not the measurement.
    if (FILE* f = std::fopen("/proc/self/clear_refs", "w")) {
        std::fputs("5", f);
        std::fclose(f);
    }
    if (wants_serving(a)) return bench_serving(a, settings, read_gbs, a.has("--prompt") ? a.str("--prompt") : kDefaultText);
    auto engine = core::Engine::load(a.pos("MODEL"), settings);
    // On a GPU the roofline is the device's: its read bandwidth, timed on it.
    const int gpu = engine->gpu_index();
    if (gpu >= 0) read_gbs = backend::measure_device_read_gbs(gpu);
    const model::Model& m = engine->model();
    model::Context& ctx = engine->context();
    const int64_t V = m.config().n_vocab;
    sched::Sampler sampler(sp, static_cast<int32_t>(V));
    auto next_token = [&](const float* logits) { return sp.greedy() ? argmax(logits, V) : sampler.sample(logits); };

    std::string text = a.has("--prompt") ? a.str("--prompt") : kDefaultText;
    std::vector<int32_t> prompt = engine->vocab().encode(text, true);
    if (prompt.empty()) throw UsageError("the prompt text is empty");
    while (static_cast<int64_t>(prompt.size()) < prompt_len) {
        const auto more = engine->vocab().encode(text, false);
        prompt.insert(prompt.end(), more.begin(), more.end());
    }
    prompt.resize(static_cast<size_t>(prompt_len));
    if (prompt_len + std::max(n_decode, warmup) > ctx.n_ctx()) {
        throw UsageError("--prompt-len + max(-n, --warmup) = " + std::to_string(prompt_len + std::max(n_decode, warmup)) +
                         " exceeds the context of " + std::to_string(ctx.n_ctx()) + " tokens (use --ctx, or fewer tokens)");
    }

    // Warm-up: a cache that holds every expert starts full (the fully
    // resident baseline); then the same prompt and some decode steps, so the
    // cache and the page tables are in their steady state.
    if (auto* store = engine->expert_store(); store && store->slots() >= store->experts_total()) {
        store->fill_free_slots();
        engine->wait_idle();
    }
    {
        const float* logits = ctx.decode(prompt, false);
        for (int64_t i = 0; i < warmup; ++i) {
            const int32_t t = next_token(logits);
            logits = ctx.decode({&t, 1}, false);
        }
        engine->wait_idle();
        ctx.clear();
    }

    auto t0 = std::chrono::steady_clock::now();
    const float* logits = ctx.decode(prompt, false);
    const double prefill_s = seconds_since(t0);

    experts::ExpertStoreStats s0 = engine->expert_stats(), s1{};
    const experts::ExpertStoreStats h0 = engine->host_cache() ? engine->host_cache()->stats() : experts::ExpertStoreStats{};
    const model::DeviceExpertStats d0 = engine->device_expert_stats();
    const experts::PredictionCounts p0 = engine->prediction_counts();
    model::DecodeProfile profile;
    const bool profiling = a.flag_set("--profile");
    if (profiling) ctx.set_profile(&profile);
    t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < n_decode; ++i) {
        const int32_t t = next_token(logits);
        logits = ctx.decode({&t, 1}, false);
    }
    const double decode_s = seconds_since(t0);
    if (profiling) ctx.set_profile(nullptr);
    // The machine's bandwidth drifts on a shared host: measure it again right
    // after the decode and keep the better peak (the roofline is a ceiling);
    // the sustained rates before and after bracket the decode's time.
    const uint64_t peak_rss = peak_rss_bytes();
    double sustained_gbs = 0;
    if (gpu >= 0) {
        read_gbs = std::max(read_gbs, backend::measure_device_read_gbs(gpu));
        sustained_gbs = read_gbs;  // a device probe's passes do not drift as a shared host's do
    } else {
        const core::ReadBandwidth after = core::measure_read_bandwidth(threads, 256ull << 20);
        read_gbs = std::max(read_gbs, after.peak_gbs);
        sustained_gbs = (before.sustained_gbs + after.sustained_gbs) / 2.0;
    }
    // The weight kernel alone on the model's bulk weight type (its experts',
    // else its attention's): does it keep up with the memory?
    const auto& layers = engine->model().weights().layers;
    const auto moe = std::find_if(layers.begin(), layers.end(), [](const model::LayerWeights& L) { return L.ffn == model::FfnKind::Moe; });
    const kernels::WeightType bulk = moe != layers.end() ? moe->expert(0).gate.type
                                     : layers.empty()    ? kernels::WeightType::F32
                                                         : layers[0].wq.type;
    const double kernel_gbs = gpu >= 0 ? backend::measure_device_gemm_gbs(gpu, static_cast<uint32_t>(bulk))
                                       : core::measure_gemm_gbs(threads, bulk, 256ull << 20, moe != layers.end());
    s1 = engine->expert_stats();
    const model::DeviceExpertStats d1 = engine->device_expert_stats();
    // A GPU's missing experts during the decode, by path (hybrid placement).
    const uint64_t miss_cpu = d1.miss_cpu - d0.miss_cpu, miss_link = d1.miss_link - d0.miss_link,
                   miss_both = d1.miss_both - d0.miss_both;
    const double misses = double(miss_cpu + miss_link + miss_both);
    experts::PredictionCounts pc = engine->prediction_counts();
    pc.predicted -= p0.predicted;
    pc.routed -= p0.routed;
    pc.correct -= p0.correct;

    const model::Model::Sizes sz = m.sizes();
    const double decode_tok_s = n_decode / decode_s;
    const double prefill_tok_s = prompt_len / prefill_s;
    // Prefill work: every prompt token through every matrix it uses (the
    // embedding is a lookup, the output head runs for the last token only),
    // plus causal attention (QK^T and PV over the positions so far).
    const model::ModelConfig& mc = m.config();
    const double head_params = static_cast<double>(mc.n_vocab) * static_cast<double>(mc.n_embd);
    const double P = static_cast<double>(prompt_len);
    const double head_copies = m.weights().output_tied ? 1.0 : 2.0;  // embedding (+ separate output head)
    const double prefill_flops = 2.0 * (static_cast<double>(sz.params_active) - head_copies * head_params) * P + 2.0 * head_params +
                                 4.0 * static_cast<double>(mc.n_layer * mc.n_head * mc.head_dim) * P * (P + 1.0) / 2.0;
    const double achieved_gbs = static_cast<double>(sz.bytes_active) * decode_tok_s / 1e9;
    const uint64_t demanded = s1.demanded - s0.demanded;
    const double hit_rate = demanded ? double(s1.hits - s0.hits) / double(demanded) : 1.0;
    const double loaded_per_token = double(s1.bytes_loaded - s0.bytes_loaded) / double(n_decode);
    const double stall = decode_s > 0 ? std::min(1.0, (s1.stall_seconds - s0.stall_seconds) / decode_s) : 0.0;
    // Predictor quality against what the router then chose (decode steps only).
    const double pf_precision = pc.precision();
    const double pf_recall = pc.recall();
    const uint64_t pf_loads = s1.prefetch_loads - s0.prefetch_loads;
    const uint64_t pf_used = s1.prefetch_used - s0.prefetch_used;
    auto* store = engine->expert_store();
    const TelemetrySnapshot snap = engine->snapshot();
    const int64_t experts_total = store ? store->experts_total() : (m.config().n_expert > 0 ? engine->plan().experts_total : 0);
    const int64_t slots = store ? store->slots() : snap.expert_slots;

    std::ostringstream js;
    js.precision(6);
    js << "{\"model\": \"" << json_escape(a.pos("MODEL")) << "\", \"device\": \"" << json_escape(engine->device())
       << "\", \"threads\": " << threads
       << ", \"prompt_tokens\": " << prompt_len << ", \"decode_tokens\": " << n_decode
       << ", \"prefill_tok_s\": " << prefill_tok_s << ", \"prefill_gflops\": " << prefill_flops / prefill_s / 1e9
       << ", \"prefill_vs_decode\": " << prefill_tok_s / decode_tok_s << ", \"decode_tok_s\": " << decode_tok_s
       << ", \"active_weight_bytes_per_token\": " << sz.bytes_active << ", \"machine_read_gbs\": " << read_gbs
       << ", \"achieved_read_gbs\": " << achieved_gbs << ", \"roofline_fraction\": " << achieved_gbs / read_gbs
       << ", \"machine_read_sustained_gbs\": " << sustained_gbs
       << ", \"roofline_fraction_sustained\": " << achieved_gbs / sustained_gbs
       << ", \"kernel_stream_gbs\": " << kernel_gbs << ", \"kernel_tuning\": " << engine->kernel_tuning().to_json()
       << ", \"expert_slots\": " << slots << ", \"experts_total\": " << experts_total
       << ", \"expert_cache_fraction\": " << (experts_total ? double(slots) / experts_total : 0.0)
       << ", \"policy\": \"" << engine->settings().policy << "\", \"prefetch\": "
       << (engine->settings().prefetch ? "true" : "false") << ", \"expert_hit_rate\": " << hit_rate
       << ", \"expert_bytes_loaded_per_token\": " << loaded_per_token << ", \"stall_fraction\": " << stall
       << ", \"prefetch_precision\": " << pf_precision << ", \"prefetch_recall\": " << pf_recall
       << ", \"prefetch_loads_per_token\": " << double(pf_loads) / n_decode
       << ", \"prefetch_loads_used\": " << (pf_loads ? double(pf_used) / double(pf_loads) : 0.0)
       << ", \"placement\": \"" << (gpu >= 0 ? engine->settings().placement : std::string("cpu")) << "\""
       << ", \"misses_per_token\": " << misses / double(n_decode)
       << ", \"miss_fraction_cpu\": " << (misses > 0 ? double(miss_cpu) / misses : 0.0)
       << ", \"miss_fraction_link\": " << (misses > 0 ? double(miss_link) / misses : 0.0)
       << ", \"miss_fraction_both\": " << (misses > 0 ? double(miss_both) / misses : 0.0)
       << ", \"hybrid_rates\": {\"link_gbs\": " << d1.link_bps / 1e9 << ", \"cpu_gbs\": " << d1.cpu_bps / 1e9
       << ", \"cpu_gflops\": " << d1.cpu_flops / 1e9 << "}"
       << ", \"kernels\": \"" << kernels::kernel_level_name(kernels::kernel_level()) << "\", \"repacked_weight_bytes\": " << engine->plan().repacked_bytes
       << ", \"repacked_bytes\": " << engine->repacked_bytes()
       << ", \"peak_rss_bytes\": " << peak_rss
       << ", \"fast_tier_peak_bytes\": " << engine->ledger().peak_reserved(memory::Tier::Fast);
    if (const experts::ExpertStore* hc = engine->host_cache()) {
        // Three tiers: host RAM's cache over the model file, during the decode.
        const experts::ExpertStoreStats h1 = hc->stats();
        const uint64_t hd = h1.demanded - h0.demanded;
        js << ", \"host_cache\": {\"slots\": " << hc->slots() << ", \"experts_total\": " << hc->experts_total()
           << ", \"source\": \"" << hc->source_name() << "\", \"hit_rate\": "
           << (hd ? double(h1.hits - h0.hits) / double(hd) : 1.0)
           << ", \"file_bytes_per_token\": " << double(h1.bytes_loaded - h0.bytes_loaded) / double(n_decode) << "}";
    }
    {
        // The file's recipe: per tensor class, its types (quant/recipe.h).
        js << ", \"recipe\": {";
        bool first = true;
        for (const quant::ClassTypes& c : quant::file_recipe(engine->model().file())) {
            js << (first ? "" : ", ") << "\"" << quant::class_name(c.cls) << "\": \"" << quant::describe_types(c) << "\"";
            first = false;
        }
        js << "}";
    }
    const ProfileSummary prof = profiling ? summarize(profile, decode_s) : ProfileSummary{};
    if (profiling) {
        js << ", \"profile\": {\"threads\": [";
        for (size_t i = 0; i < prof.threads.size(); ++i) {
            const ThreadShares& t = prof.threads[i];
            js << (i ? ", " : "") << "{\"quant_weights_s\": " << t.quant_s << ", \"quant_weights_gbs\": " << t.quant_gbs
               << ", \"f32_weights_s\": " << t.f32_s << ", \"attention_s\": " << t.attention_s
               << ", \"waiting_in_regions_s\": " << t.waiting_s << ", \"other_in_regions_s\": " << t.other_s
               << ", \"outside_regions_s\": " << t.outside_s << ", \"region_end_wait_s\": " << t.end_wait_s << "}";
        }
        js << "], \"quant_weights_gbs\": " << prof.quant_gbs << ", \"quant_weights_vs_machine\": " << prof.quant_gbs / read_gbs
           << "}";
    }
    js << "}";
    if (a.flag_set("--json")) {
        std::printf("%s\n", js.str().c_str());
        return 0;
    }
    std::printf("model               %s\n", a.pos("MODEL").c_str());
    std::printf("device              %s\n", engine->device().c_str());
    std::printf("prefill             %.1f tok/s (%lld tokens), %.1f GFLOP/s, %.2fx decode\n", prefill_tok_s,
                static_cast<long long>(prompt_len), prefill_flops / prefill_s / 1e9, prefill_tok_s / decode_tok_s);
    std::printf("decode              %.1f tok/s (%lld tokens)\n", decode_tok_s, static_cast<long long>(n_decode));
    std::printf("roofline            %.1f%% (%.2f GB/s of %.2f GB/s measured, %s per token)\n",
                100.0 * achieved_gbs / read_gbs, achieved_gbs, read_gbs, human_bytes(sz.bytes_active).c_str());
    std::printf("sustained           %.1f%% of the %.2f GB/s the fastest read loop kept up over all its passes\n",
                100.0 * achieved_gbs / sustained_gbs, sustained_gbs);
    std::printf("kernels             %s, %s of the weights repacked in place as they load (%s so far, reloads included)\n",
                kernels::kernel_level_name(kernels::kernel_level()), human_bytes(engine->plan().repacked_bytes).c_str(),
                human_bytes(engine->repacked_bytes()).c_str());
    if (kernel_gbs > 0)
        std::printf("kernel alone        %.2f GB/s of %s weights (gemm over a large buffer, no forward pass)\n", kernel_gbs,
                    kernels::type_traits(bulk)->name);
    std::printf("%s\n", engine->kernel_tuning().summary().c_str());
    if (experts_total > 0) {
        std::printf("expert cache        %lld of %lld experts, policy %s, prefetch %s\n", static_cast<long long>(slots),
                    static_cast<long long>(experts_total), engine->settings().policy.c_str(),
                    engine->settings().prefetch ? "on" : "off");
        std::printf("hit rate            %.1f%%, %s loaded per token, stalled %.1f%% of decode\n", 100 * hit_rate,
                    human_bytes(static_cast<uint64_t>(loaded_per_token)).c_str(), 100 * stall);
        if (misses > 0)
            std::printf("missing experts     %.2f per token: %.0f%% computed on the CPU, %.0f%% copied, %.0f%% both "
                        "(placement %s)\n",
                        misses / double(n_decode), 100.0 * double(miss_cpu) / misses, 100.0 * double(miss_link) / misses,
                        100.0 * double(miss_both) / misses, engine->settings().placement.c_str());
        std::printf("prefetch            precision %.2f, recall %.2f; %.2f loads per token, %.0f%% of them used\n",
                    pf_precision, pf_recall, double(pf_loads) / n_decode,
                    pf_loads ? 100.0 * double(pf_used) / double(pf_loads) : 0.0);
    }
    std::printf("peak RSS            %s\n", human_bytes(peak_rss).c_str());
    if (profiling) {
        std::printf("profile             %% of decode time per thread: quantized weights / f32 weights / KV attention /\n"
                    "                    waiting inside regions / rest of the regions / outside them (thread 0: waiting\n"
                    "                    at the regions' ends + serial work; others: idle)\n");
        for (size_t i = 0; i < prof.threads.size(); ++i) {
            const ThreadShares& t = prof.threads[i];
            const double pct = 100.0 / decode_s;
            std::printf("  thread %-10zu %.1f / %.1f / %.1f / %.1f / %.1f / %.1f", i, t.quant_s * pct, t.f32_s * pct,
                        t.attention_s * pct, t.waiting_s * pct, t.other_s * pct, t.outside_s * pct);
            if (i == 0) std::printf(" (%.1f + %.1f)", t.end_wait_s * pct, (t.outside_s - t.end_wait_s) * pct);
            std::printf(" (quantized weights at %.2f GB/s)\n", t.quant_gbs);
        }
        std::printf("  all threads       quantized weights streamed at %.2f GB/s while in their kernels, %.1f%% of the measured bandwidth\n",
                    prof.quant_gbs, 100.0 * prof.quant_gbs / read_gbs);
    }
    return 0;
}

}  // namespace strata::cli
