#include "core/engine.h"
#include "model/plan_model.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "platform/numa.h"
#include "backend/device.h"
#include "common/error.h"
#include "common/json.h"
#include "common/log.h"
#include "kernels/dispatch.h"
#include "memory/system_memory.h"

namespace strata {

std::string EngineSettings::validate() const {
    if (expert_slots == 0) return "expert_slots is 0: the expert cache needs at least one slot (or -1 for automatic)";
    if (expert_slots < -1) return "expert_slots " + std::to_string(expert_slots) + " is invalid (use a positive count, or -1)";
    if (expert_cache_fraction != -1.0 && !(expert_cache_fraction > 0.0 && expert_cache_fraction <= 1.0)) {
        std::ostringstream os;
        os << "expert_cache_fraction " << expert_cache_fraction << " is out of range: expected 0 < fraction <= 1";
        return os.str();
    }
    if (policy != "lru" && policy != "lfu" && policy != "arc" && policy != "pinned")
        return "policy '" + policy + "' is unknown (use lru, lfu, arc or pinned)";
    if (policy == "pinned" && pin_file.empty()) return "policy 'pinned' needs a pin file (strata-cli calibrate writes one)";
    if (prefetch_width < 0 || prefetch_width > 4096) return "prefetch_width " + std::to_string(prefetch_width) + " is out of range (0..4096)";
    if (predictor != "lookahead" && predictor != "frequency" && predictor != "combined")
        return "predictor '" + predictor + "' is unknown (use lookahead, frequency or combined)";
    if (threads < 0 || threads > 1024) return "threads " + std::to_string(threads) + " is out of range (0..1024)";
    if (io_threads < 1 || io_threads > 64) return "io_threads " + std::to_string(io_threads) + " is out of range (1..64)";
    if (n_ctx < 0) return "n_ctx must not be negative";
    if (n_batch < 1) return "n_batch must be at least 1";
    if (kv_tokens < 0) return "kv_tokens " + std::to_string(kv_tokens) + " is invalid (0 = one sequence of the context size)";
    if (kv_block_tokens < 1 || kv_block_tokens > 4096)
        return "kv_block_tokens " + std::to_string(kv_block_tokens) + " is out of range (1..4096)";
    if (kv_type != "f32" && kv_type != "q8") return "kv_type '" + kv_type + "' is unknown (use f32 or q8)";
    if (std::string err = cpu::parse_numa_policy(numa, nullptr); !err.empty()) return err;
    if (core::KernelTuningMode m; !core::parse_kernel_tuning_mode(kernel_tuning, &m))
        return "kernel_tuning '" + kernel_tuning + "' is unknown (use auto, measure, cached or off)";
    if (std::string err = backend::parse_device(device, nullptr); !err.empty()) return err;
    if (placement != "auto" && placement != "transfer")
        return "placement '" + placement + "' is unknown (use auto or transfer)";
    if (cpu_moe_layers < -1) return "cpu_moe_layers " + std::to_string(cpu_moe_layers) + " is invalid (-1: all MoE layers, 0: none, N: the first N)";
    return "";
}

namespace core {

std::vector<experts::ExpertKey> read_pin_file(const std::string& path, const model::Model& m) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(path + ": cannot open the calibration file");
    std::stringstream ss;
    ss << in.rdbuf();
    const nlohmann::json doc = json::parse(ss.str(), path);
    if (!doc.is_object() || !doc.contains("strata_calibration") || !doc["strata_calibration"].is_number())
        throw Error(path + ": not a Strata calibration file (no 'strata_calibration' key)");
    const model::ModelConfig& c = m.config();
    auto num = [&](const char* key) -> int64_t {
        if (!doc.contains(key) || !doc[key].is_number_integer()) throw Error(path + ": calibration file lacks '" + key + "'");
        return doc[key].get<int64_t>();
    };
    if (num("n_layer") != c.n_layer || num("n_expert") != c.n_expert) {
        throw Error(path + ": calibration file was made for a model with " + std::to_string(num("n_layer")) +
                    " layers x " + std::to_string(num("n_expert")) + " experts, but this model has " +
                    std::to_string(c.n_layer) + " x " + std::to_string(c.n_expert) +
                    "; run strata-cli calibrate on this model");
    }
    if (!doc.contains("pinned") || !doc["pinned"].is_array()) throw Error(path + ": calibration file lacks the 'pinned' list");
    std::vector<experts::ExpertKey> keys;
    for (const nlohmann::json& p : doc["pinned"]) {
        if (!p.is_array() || p.size() != 2 || !p[0].is_number_integer() || !p[1].is_number_integer())
            throw Error(path + ": 'pinned' entries must be [layer, expert] pairs");
        const int64_t layer = p[0].get<int64_t>();
        const int64_t e = p[1].get<int64_t>();
        if (layer < 0 || layer >= c.n_layer || e < 0 || e >= c.n_expert ||
            m.weights().layers[static_cast<size_t>(layer)].ffn != model::FfnKind::Moe) {
            throw Error(path + ": pinned expert [" + std::to_string(layer) + ", " + std::to_string(e) +
                        "] does not exist in this model");
        }
        keys.push_back(static_cast<experts::ExpertKey>(layer * c.n_expert + e));
    }
    return keys;
}

memory::PlanSettings plan_settings(const EngineSettings& s, int64_t pinned) {
    memory::PlanSettings p;
    p.fast_budget = s.fast_budget;  // 0 (automatic) and kNoBudget (Ledger::kUnlimited) mean the same to the plan
    if (s.fast_budget == 0) p.fast_available = memory::available_ram_bytes();
    p.slow_budget = s.slow_budget;
    p.expert_cache_fraction = s.expert_cache_fraction;
    p.expert_slots = s.expert_slots;
    p.pinned_experts = pinned;
    p.n_ctx = s.n_ctx;
    p.n_batch = s.n_batch;
    p.threads = s.threads;
    p.kv_tokens = s.kv_tokens;
    p.kv_block_tokens = s.kv_block_tokens;
    p.kv_type = kv::parse_kv_type(s.kv_type);
    p.prefetch = s.prefetch;
    p.numa = s.numa;
    // Expert reads land directly in their slots (O_DIRECT into aligned
    // buffers): no staging buffers on the CPU tier pair.
    p.transfer_buffers = 0;
    return p;
}


std::unique_ptr<Engine> Engine::load(const std::string& path, const EngineSettings& settings, const LoadProgress& progress) {
    if (const std::string err = settings.validate(); !err.empty()) throw Error("invalid setting: " + err);
    auto report = [&](std::string_view stage, double fraction) {
        if (progress && !progress(stage, fraction)) throw Cancelled("loading " + path + " was cancelled");
    };
    report("opening", 0.0);
    std::unique_ptr<Engine> eng(new Engine());
    eng->settings_ = settings;
    eng->model_ = model::Model::load(path, /*random_access=*/true);
    const model::Model& m = *eng->model_;
    const model::ModelConfig& c = m.config();

    std::vector<experts::ExpertKey> pinned;
    if (!settings.pin_file.empty()) pinned = read_pin_file(settings.pin_file, m);

    // The device: auto takes a GPU when there is one (and says why not when not).
    backend::DeviceRequest request;
    (void)backend::parse_device(settings.device, &request);  // validate() checked it
    const backend::DeviceChoice device =
        backend::choose_device(request, backend::probe_devices(), backend::cuda_forward_built());
    if (!device.error.empty()) throw Error(device.error);
    logger("engine")->info("{}", device.reason);
    eng->device_ = device.reason;
    if (device.kind == backend::DeviceMode::Cuda) {
#ifdef STRATA_HAVE_CUDA
        std::string mismatch;
        try {
            load_on_gpu(*eng, path, pinned, device.index, report, &mismatch);
        } catch (const Cancelled&) {
            throw;
        } catch (const std::exception& e) {
            if (request.mode == backend::DeviceMode::Cuda) throw;  // asked for the GPU: say why it failed
            mismatch = e.what();
        }
        if (mismatch.empty()) {
            eng->finish_load(path, report);
            return eng;
        }
        // Never compute wrong text: the CPU computes, and the log, About and
        // the snapshot say why.
        logger("engine")->warn("{}: the GPU failed its check ({}); computing on the CPU instead", path, mismatch);
        eng.reset();
        EngineSettings cpu = settings;
        cpu.device = "cpu";
        std::unique_ptr<Engine> on_cpu = load(path, cpu, progress);
        on_cpu->device_ = "device auto: the CPU, because the GPU (" + device.reason.substr(device.reason.find(':') + 2) +
                          ") failed its check: " + mismatch;
        return on_cpu;
#endif
    }

    report("planning", 0.02);
    eng->tune_cpu_kernels();
    eng->plan_ = memory::make_plan(model::plan_model(m), plan_settings(settings, static_cast<int64_t>(pinned.size())));
    if (!eng->plan_.fits) throw Error(path + ": " + eng->plan_.reason);
    report("weights", 0.05);

    memory::Ledger& ledger = eng->ledger_;
    memory::apply_budgets(eng->plan_, ledger);
    ledger.set_description(memory::Tier::Fast, "RAM");
    ledger.set_description(memory::Tier::Slow, "model file");
    // NUMA: place the fast tier (every buffer below) and run the compute where
    // the plan says. The calling thread is the one that drives the forward
    // pass and creates the compute pool, whose workers inherit its affinity.
    const cpu::NumaDecision& numa = eng->plan_.numa;
    if (!numa.error.empty()) throw Error(numa.error);
    if (numa.mode == cpu::NumaMode::Bind) {
        ledger.set_placement(memory::Tier::Fast, {memory::Placement::Bind, numa.node});
        eng->saved_cpus_ = cpu::current_thread_cpus();
        if (const std::string err = cpu::set_current_thread_cpus(numa.cpus); !err.empty())
            throw Error("numa bind to node " + std::to_string(numa.node) + ": " + err);
        eng->pinned_thread_ = true;
    } else if (numa.mode == cpu::NumaMode::Interleave) {
        ledger.set_placement(memory::Tier::Fast, {memory::Placement::Interleave, -1});
    }
    logger("memory")->info("{}", cpu::numa_summary(eng->plan_.numa_topology, numa));
    // Allocator slack, thread stacks and tables: held so the budget is honest.
    ledger.reserve(memory::Account::RuntimeReserve, memory::Tier::Fast, eng->plan_.bytes(memory::Account::RuntimeReserve));

    experts::FileSlowTier file(path, settings.direct_io);
    // Copying the shared weights is the long part of loading: 5% .. 90%.
    eng->resident_ = std::make_unique<ResidentWeights>(m, ledger, memory::Tier::Fast, file, [&](uint64_t done, uint64_t total) {
        return !progress || progress("weights", 0.05 + 0.85 * (total ? static_cast<double>(done) / total : 1.0));
    });
    report("experts", 0.9);

    model::ContextParams cp;
    cp.n_ctx = settings.n_ctx;
    cp.n_batch = settings.n_batch;
    cp.n_threads = settings.threads;
    if (numa.mode == cpu::NumaMode::Bind) cp.cpus = numa.cpus;  // the compute workers run on the bound node
    // The context first: its KV cache and scratch are not optional, the
    // expert cache gets what remains.
    kv::KvCacheParams kp = model::kv_cache_params(c, eng->plan_.kv_blocks, eng->plan_.kv_block_tokens, eng->plan_.kv_type);
    kp.state_sequences = eng->plan_.state_sequences;
    eng->kv_ = std::make_unique<kv::KvCache>(kp, &ledger, memory::Tier::Fast);
    eng->ctx_ = std::make_unique<model::Context>(m, cp, &eng->resident_->weights(), nullptr, eng->kv_.get());
    ledger.reserve(memory::Account::Activations, memory::Tier::Fast, eng->ctx_->scratch_bytes());
    ledger.set_used(memory::Account::Activations, memory::Tier::Fast, eng->ctx_->scratch_bytes());
    if (c.n_expert > 0) {
        // The experts' home: the file, accounted in the slow tier.
        const model::Model::Sizes sz = m.sizes();
        ledger.reserve(memory::Account::ExpertsHome, memory::Tier::Slow, sz.bytes_experts);
        ledger.set_used(memory::Account::ExpertsHome, memory::Tier::Slow, sz.bytes_experts);
        experts::ExpertStoreSettings ss;
        ss.slots = eng->plan_.expert_slots;
        ss.policy = settings.policy == "pinned" ? "lru" : settings.policy;
        ss.pinned = pinned;
        ss.direct_io = settings.direct_io;
        ss.io_threads = settings.io_threads;
        eng->store_ = std::make_unique<experts::ExpertStore>(m, ledger, memory::Tier::Fast, ss);
        eng->ctx_->set_expert_provider(eng->store_.get());
        eng->cache_ = eng->store_.get();
    }
    eng->finish_load(path, report);
    return eng;
}

// Before any weight is repacked: the tuning may pick kernels with another layout.
void Engine::tune_cpu_kernels() {
    const kernels::WeightType bulk = bulk_weight_type(*model_);
    KernelTuningMode mode = KernelTuningMode::Auto;
    (void)parse_kernel_tuning_mode(settings_.kernel_tuning, &mode);  // validate() checked it
    // Measuring streams a buffer of its own (kernel_tuning_stream_bytes) beside
    // the model: under a fast budget that it would take an eighth of, the
    // cached result or the defaults instead (the budget is the user's word).
    const uint64_t budget = settings_.fast_budget;
    if (mode == KernelTuningMode::Auto && budget > 0 && budget != kNoBudget && kernel_tuning_stream_bytes() * 8 > budget)
        mode = KernelTuningMode::Cached;
    const std::string cache =
        settings_.kernel_tuning_cache.empty() ? default_kernel_tuning_cache() : settings_.kernel_tuning_cache;
    // Rows as wide as the model's (what its experts' gate and up rows hold,
    // in two classes): the knobs do depend on it. On a GLM-4.5-Air-shaped
    // Q4_0 file (4096) rows of 1024 picked the plain loops; 4096-wide ones
    // pick the read-once pair, and decode is 5% faster (AMD EPYC Zen 5, 2
    // threads, 3 of 4 alternating pairs ahead). Cached per class.
    kernel_tuning_ = tune_kernels(settings_.threads, bulk, tuning_cols(*model_), mode, cache);
    logger("kernels")->info("{}", kernel_tuning_.summary());
}

void Engine::finish_load(const std::string& path, const Report& report) {
    {
        const tok::Vocab& v = model_->vocab();
        auto text_of = [&](int32_t id) -> std::string {
            if (id < 0 || id >= v.n_tokens()) return {};
            return v.token_text(id);
        };
        chat_template_.emplace(chat::ChatTemplate::load(model_->file().get_string_or("tokenizer.chat_template", ""),
                                                        text_of(v.bos()), text_of(v.eos())));
        logger("engine")->info("chat template: {}", chat_template_->describe());
    }
    const model::Model& m = *model_;
    const model::ModelConfig& c = m.config();
    const EngineSettings& settings = settings_;
    // Everything the engine computes with is now out of the mapping.
    m.file().drop_pages();

    Engine* self = this;
    recent_.reserve(kRecentMax);
    heat_.assign(static_cast<size_t>(c.n_layer * std::max<int64_t>(c.n_expert, 1)), 0.0f);
    ctx_->set_routing_observer([self](const model::RoutingEvent& e) { self->on_route(e); });
    ctx_->set_step_observer([self](int64_t n, double s) { self->on_step(n, s); });
    ctx_->set_step_begin_observer([self](int64_t n) { self->on_step_begin(n); });
    if (!settings.trace_file.empty()) {
        if (c.n_expert == 0) throw Error(path + ": not a mixture-of-experts model: no routing to trace");
        trace_ = std::make_unique<experts::TraceWriter>(settings.trace_file, experts::TraceHeader::for_model(m));
    }
    set_prefetch(settings.prefetch, settings.prefetch_width);
    report("ready", 1.0);
}

Engine::~Engine() {
    if (pinned_thread_) (void)cpu::set_current_thread_cpus(saved_cpus_);
    if (trace_) {
        try {
            trace_->finish();
        } catch (const std::exception& e) {
            logger("experts")->error("{}", e.what());
        }
    }
}

void Engine::trace_tokens(int64_t first_pos, std::span<const int32_t> ids) {
    if (trace_) trace_->tokens(first_pos, ids);
}

Engine::TraceCounts Engine::finish_trace() {
    if (!trace_) return {};
    std::unique_ptr<experts::TraceWriter> t = std::move(trace_);
    install_lookahead();  // the trace may have been the lookahead's only user
    t->finish();
    return {t->routes(), t->lookaheads(), t->bytes()};
}

void Engine::on_step_begin(int64_t n_tokens) {
    step_tokens_ = n_tokens;
    ++step_index_;
    if (trace_) trace_->begin_step(n_tokens);
}

void Engine::issue_prefetch(int64_t layer, int64_t key) {
    // One-token decode steps prefetch (see kMaxPrefetchStep); a prompt chunk
    // demands all of its experts a moment later anyway, and its many guesses
    // would push the working set out.
    if (!cache_ || !predictor_ || layer < 0 || step_tokens_ > kMaxPrefetchStep) return;
    predictor_->predict_into(layer, key, predictions_);
    const int64_t E = model_->config().n_expert;
    prefetch_keys_.clear();
    for (const experts::ExpertPrediction& p : predictions_)
        prefetch_keys_.push_back(static_cast<experts::ExpertKey>(p.layer * E + p.expert));
    cache_->prefetch(layer, prefetch_keys_);
}

Engine::ListenerId Engine::add_routing_listener(model::RoutingObserver obs) {
    route_listeners_.emplace_back(next_listener_, std::move(obs));
    return next_listener_++;
}

Engine::ListenerId Engine::add_lookahead_listener(model::LookaheadObserver obs) {
    lookahead_listeners_.emplace_back(next_listener_, std::move(obs));
    install_lookahead();
    return next_listener_++;
}

void Engine::remove_listener(ListenerId id) {
    std::erase_if(route_listeners_, [id](const auto& l) { return l.first == id; });
    const size_t before = lookahead_listeners_.size();
    std::erase_if(lookahead_listeners_, [id](const auto& l) { return l.first == id; });
    if (lookahead_listeners_.size() != before) install_lookahead();  // the lookahead may no longer be wanted
}

void Engine::install_lookahead() {
    // The lookahead costs a router product per layer: only while someone uses
    // it. A cache that holds every expert has nothing to prefetch.
    const bool cache_holds_all = cache_ && cache_->slots() >= cache_->experts_total();
    const bool predictor_wants_it = predictor_ && settings_.predictor != "frequency" && !cache_holds_all;
    if (predictor_wants_it || trace_ || !lookahead_listeners_.empty()) {
        Engine* self = this;
        ctx_->set_lookahead_observer([self](const model::LookaheadEvent& e) { self->on_lookahead(e); });
    } else {
        ctx_->set_lookahead_observer({});
    }
}

void Engine::on_route(const model::RoutingEvent& e) {
    for (const auto& l : route_listeners_) l.second(e);
    note_token(e.seq, e.pos);
    if (trace_) trace_->on_route(e);
    if (predictor_) {
        // The predictor tells tokens apart by (sequence, position).
        model::RoutingEvent k = e;
        k.pos = token_key(e.seq, e.pos);
        predictor_->on_route(k);
        // Strategies without a lookahead predict the next MoE layer from here
        // (after the last MoE layer: the first one, for the next token).
        if (settings_.predictor == "frequency") {
            const int64_t next = predictor_->next_moe_layer(e.layer);
            if (next >= 0) issue_prefetch(next, k.pos);
            else issue_prefetch(predictor_->first_moe_layer(), k.pos + 1);
        }
    }
    std::lock_guard<std::mutex> lock(tele_mu_);
    if (heat_layer_ < 0) heat_layer_ = e.layer;
    float* row = heat_.data() + e.layer * e.n_expert;
    // Heat: share of recent activations, halving every 32 tokens.
    constexpr float kDecay = 0.97857206f;  // 2^(-1/32)
    for (int64_t x = 0; x < e.n_expert; ++x) row[x] *= kDecay;
    for (int64_t k = 0; k < e.n_used; ++k) row[e.experts[k]] += 1.0f - kDecay;
}

void Engine::note_token(int32_t seq, int64_t pos) {
    auto [it, fresh] = seq_marks_.try_emplace(seq);
    SeqMark& m = it->second;
    if (m.step != step_index_) {  // its first event in this pass
        // A sequence id new after others (Context::clear() may hand out a new
        // one), or a position not past the earlier passes': it starts over.
        const bool restart = fresh ? seq_marks_.size() > 1 : pos <= m.max;
        if (restart) {
            if (predictor_) predictor_->begin_sequence();
            if (trace_) trace_->begin_sequence();
            m.max = -1;
        }
        m.step = step_index_;
    }
    m.max = std::max(m.max, pos);
}

void Engine::on_lookahead(const model::LookaheadEvent& e) {
    for (const auto& l : lookahead_listeners_) l.second(e);
    note_token(e.seq, e.pos);
    if (trace_) trace_->on_lookahead(e);
    if (!predictor_) return;
    model::LookaheadEvent k = e;
    k.pos = token_key(e.seq, e.pos);
    predictor_->on_lookahead(k);
    // The next layer's most likely experts, best first, one layer ahead.
    if (settings_.predictor != "frequency") issue_prefetch(e.layer, k.pos);
}

void Engine::on_step(int64_t n_tokens, double seconds) {
    std::lock_guard<std::mutex> lock(tele_mu_);
    tokens_ += n_tokens;
    compute_seconds_ += seconds;
    if (!cache_) return;
    const experts::ExpertStoreStats st = cache_->stats();
    if (recent_.size() >= kRecentMax) recent_.erase(recent_.begin());
    recent_.push_back({st.demanded - last_stats_.demanded, st.hits - last_stats_.hits, n_tokens});
    last_stats_ = st;
    int64_t window = 0;
    for (auto it = recent_.rbegin(); it != recent_.rend(); ++it) window += it->tokens;
    size_t drop = 0;
    while (recent_.size() - drop > 1 && window - recent_[drop].tokens >= 64) window -= recent_[drop++].tokens;
    recent_.erase(recent_.begin(), recent_.begin() + static_cast<std::ptrdiff_t>(drop));
}

Error Engine::no_cache_error() const { return Error("this model has no experts to cache"); }

experts::ExpertStoreStats Engine::expert_stats() const { return cache_ ? cache_->stats() : experts::ExpertStoreStats{}; }

model::DeviceExpertStats Engine::device_expert_stats() const {
    const model::DeviceForward* d = ctx_ ? ctx_->device() : nullptr;
    return d ? d->expert_stats() : model::DeviceExpertStats{};
}

uint64_t Engine::ram_returned_on_unload() const {
    if (gpu_index_ >= 0) return ledger_.reserved(memory::Tier::Slow);
    return ledger_.used(memory::Tier::Fast);
}

void Engine::set_expert_slots(int64_t slots) {
    if (!cache_) throw no_cache_error();
    cache_->set_slots(slots);
    install_lookahead();  // prefetch matters again (or no longer) at this size
}

void Engine::set_expert_cache_fraction(double fraction) {
    if (!(fraction > 0.0 && fraction <= 1.0)) throw Error("expert cache fraction must be in (0, 1]");
    if (!cache_) throw no_cache_error();
    set_expert_slots(std::max<int64_t>(1, std::llround(fraction * static_cast<double>(cache_->experts_total()))));
}

void Engine::set_policy(const std::string& policy) {
    if (!cache_) throw no_cache_error();
    cache_->set_policy(policy == "pinned" ? "lru" : policy);
    settings_.policy = policy;
}

void Engine::set_pin_file(const std::string& path) {
    if (!cache_) throw no_cache_error();
    cache_->set_pinned(path.empty() ? std::vector<experts::ExpertKey>{} : read_pin_file(path, *model_));
    settings_.pin_file = path;
}

void Engine::set_prefetch(bool on, int width) {
    if (width < 0) throw Error("prefetch width must not be negative");
    settings_.prefetch = on;
    settings_.prefetch_width = width;
    prefetch_width_ = on ? (width > 0 ? width : static_cast<int>(model_->config().n_expert_used)) : 0;
    predictor_.reset();
    if (cache_ && prefetch_width_ > 0) {
        const model::ModelConfig& c = model_->config();
        std::vector<int64_t> moe_layers;
        for (const model::LayerWeights& L : model_->weights().layers)
            if (L.ffn == model::FfnKind::Moe) moe_layers.push_back(L.index);
        experts::PredictorOptions po;
        po.strategy = settings_.predictor;
        po.width = prefetch_width_;
        predictor_ = std::make_unique<experts::Predictor>(po, c.n_layer, c.n_expert, c.n_expert_used, moe_layers);
        predictions_.reserve(static_cast<size_t>(prefetch_width_));
        prefetch_keys_.reserve(static_cast<size_t>(prefetch_width_));
    }
    install_lookahead();
}

experts::PredictionCounts Engine::prediction_counts() const {
    return predictor_ ? predictor_->totals() : experts::PredictionCounts{};
}

void Engine::wait_idle() {
    if (cache_) cache_->wait_idle();
}

uint64_t Engine::repacked_bytes() const {
    return (resident_ ? resident_->repacked_bytes() : 0) + (store_ ? store_->stats().bytes_repacked : 0);
}

TelemetrySnapshot Engine::snapshot() const {
    TelemetrySnapshot t;
    t.kernels = kernels::kernel_level_name(kernels::kernel_level());
    t.repacked_bytes = plan_.repacked_bytes;
    const model::ModelConfig& c = model_->config();
    {
        std::lock_guard<std::mutex> lock(tele_mu_);
        t.tokens_processed = tokens_;
        t.compute_seconds = compute_seconds_;
        t.heat = heat_;
        uint64_t d = 0, h = 0;
        for (const Window& w : recent_) {
            d += w.demanded;
            h += w.hits;
        }
        t.hit_rate_recent = d ? double(h) / double(d) : 0.0;
    }
    t.n_layer = c.n_layer;
    t.n_expert = c.n_expert;
    t.device = device_;
    t.fast_tier = ledger_.description(memory::Tier::Fast);
    t.slow_tier = ledger_.description(memory::Tier::Slow);
    if (cache_) {
        // The expert cache, whichever device holds it: its counts, size and residency.
        const experts::ExpertStoreStats st = cache_->stats();
        t.hit_rate_total = st.hit_rate();
        t.bytes_loaded = st.bytes_loaded;
        t.bytes_loaded_per_token = t.tokens_processed ? double(st.bytes_loaded) / double(t.tokens_processed) : 0.0;
        t.stall_fraction = t.compute_seconds > 0 ? std::min(1.0, st.stall_seconds / t.compute_seconds) : 0.0;
        if (predictor_) {
            const experts::PredictionCounts pc = predictor_->totals();
            t.prefetch_precision = pc.precision();
            t.prefetch_recall = pc.recall();
        }
        t.expert_slots = cache_->slots();
        t.expert_slot_bytes = cache_->slot_bytes();
        t.policy = settings_.policy;
        const auto res = cache_->residency();
        t.residency.assign(res.size(), 0);
        for (size_t i = 0; i < res.size(); ++i) t.residency[i] = static_cast<uint8_t>(res[i]);
    }
    if (const model::DeviceForward* d = ctx_ ? ctx_->device() : nullptr) {
        // Where a device computes some experts on the CPU: the hybrid cost model's paths.
        const model::DeviceExpertStats ds = d->expert_stats();
        t.placement = settings_.placement;
        t.miss_cpu = ds.miss_cpu;
        t.miss_link = ds.miss_link;
        t.miss_both = ds.miss_both;
    }
    for (const memory::LedgerRow& r : ledger_.rows())
        t.ledger.push_back({memory::account_name(r.account), memory::tier_name(r.tier), r.reserved, r.used});
    t.fast_budget = plan_.fast_budget == memory::Ledger::kUnlimited ? 0 : plan_.fast_budget;
    t.slow_budget = settings_.slow_budget;
    return t;
}

}  // namespace core
}  // namespace strata
