#include "engine_worker.h"
#include "model/plan_model.h"

#include "quant/recipe.h"

#include <QCoreApplication>
#include <QFileInfo>
#include <QMetaObject>
#include <QThread>
#include <algorithm>

#include "chat/chat_template.h"
#include "serve/backend.h"
#include "serve/serve_loop.h"
#include "serve/tool_calls.h"
#include "serve_backend.h"
#include "common/error.h"
#include "common/log.h"
#include "core/engine.h"
#include "experts/stream_estimate.h"
#include "plan/plan.h"
#include "model/model.h"
#include "common/prompt_file.h"
#include "core/calibration.h"
#include "gguf/gguf.h"
#include "sched/generator.h"
#include "sched/scheduler.h"
#include "sched/speculative.h"
#include "chat/prompt.h"
#include "chat/tool_prompt.h"
#include "tokenizer/vocab.h"

namespace strata::desktop {

namespace {

using clock_type = std::chrono::steady_clock;

QString qs(const std::string& s) { return QString::fromStdString(s); }

QVariantMap plan_to_map(const memory::Plan& p) {
    QVariantMap m;
    m[QStringLiteral("fits")] = p.fits;
    m[QStringLiteral("reason")] = qs(p.reason);
    m[QStringLiteral("model")] = qs(p.model);
    auto budget = [](uint64_t b) { return b == memory::Ledger::kUnlimited ? 0.0 : double(b); };
    m[QStringLiteral("fastBudget")] = budget(p.fast_budget);
    m[QStringLiteral("fastBudgetAuto")] = p.fast_budget_auto;
    m[QStringLiteral("fastAvailable")] = double(p.fast_available);
    m[QStringLiteral("fastReturned")] = double(p.fast_returned);
    m[QStringLiteral("slowBudget")] = budget(p.slow_budget);
    m[QStringLiteral("fastTotal")] = double(p.fast_total);
    m[QStringLiteral("slowTotal")] = double(p.slow_total);
    m[QStringLiteral("residentMinimum")] = double(p.resident_minimum);
    m[QStringLiteral("expertSlots")] = qlonglong(p.expert_slots);
    m[QStringLiteral("expertsTotal")] = qlonglong(p.experts_total);
    m[QStringLiteral("cacheFraction")] = p.cache_fraction;
    m[QStringLiteral("nCtx")] = qlonglong(p.n_ctx);
    QVariantList rows;
    for (size_t i = 0; i < p.rows.size(); ++i) {
        const memory::LedgerRow& r = p.rows[i];
        QVariantMap row;
        row[QStringLiteral("account")] = QString::fromLatin1(memory::account_name(r.account));
        row[QStringLiteral("tier")] = QString::fromLatin1(memory::tier_name(r.tier));
        row[QStringLiteral("bytes")] = double(r.reserved);
        row[QStringLiteral("note")] = i < p.notes.size() ? qs(p.notes[i]) : QString();
        rows.append(row);
    }
    m[QStringLiteral("rows")] = rows;
    return m;
}

QVariantMap model_info(const model::Model& m) {
    const model::ModelConfig& c = m.config();
    const model::Model::Sizes sz = m.sizes();
    int64_t moe = 0;
    QVariantList moe_layers;
    for (const model::LayerWeights& L : m.weights().layers) {
        if (L.ffn != model::FfnKind::Moe) continue;
        ++moe;
        moe_layers.append(qlonglong(L.index));
    }
    QVariantMap info;
    // The file's name, as the user chose it: the name stored inside is often
    // another file's ("bench-moe-f16" in a Q4_K_M file).
    info[QStringLiteral("name")] = QFileInfo(qs(m.file().path())).completeBaseName();
    info[QStringLiteral("storedName")] = qs(c.name);
    info[QStringLiteral("quant")] = qs(quant::file_type_label(m.file()));
    info[QStringLiteral("arch")] = qs(c.arch_name);
    info[QStringLiteral("layers")] = qlonglong(c.n_layer);
    info[QStringLiteral("moeLayers")] = qlonglong(moe);
    info[QStringLiteral("moeLayerIndexes")] = moe_layers;
    info[QStringLiteral("experts")] = qlonglong(c.n_expert);
    info[QStringLiteral("expertsUsed")] = qlonglong(c.n_expert_used);
    info[QStringLiteral("paramsTotal")] = double(sz.params_total);
    info[QStringLiteral("paramsActive")] = double(sz.params_active);
    info[QStringLiteral("bytesTotal")] = double(sz.bytes_total);
    info[QStringLiteral("bytesExperts")] = double(sz.bytes_experts);
    info[QStringLiteral("vocab")] = qlonglong(c.n_vocab);
    info[QStringLiteral("contextTrain")] = qlonglong(c.n_ctx_train);
    // The recipe: per tensor class, its types ("routed_expert: q4_k 77%, q6_k 23%").
    // Grouped by types, so it reads as one line: "f32: router, attn_q, ... · q8_0: routed_expert · f16: embedding".
    QStringList order;
    QHash<QString, QStringList> classes;
    for (const quant::ClassTypes& ct : quant::file_recipe(m.file())) {
        const QString types = qs(quant::describe_types(ct));
        if (!classes.contains(types)) order << types;
        classes[types] << qs(quant::class_name(ct.cls));
    }
    QStringList recipe;
    for (const QString& types : order) recipe << types + QStringLiteral(": ") + classes[types].join(QStringLiteral(", "));
    info[QStringLiteral("recipe")] = recipe.join(QStringLiteral(" · "));
    return info;
}

}  // namespace

QString draft_mismatch(const QString& model_path, const QString& draft_path) {
    try {
        auto df = gguf::File::open(draft_path.toStdString());
        auto dv = tok::Vocab::from_gguf(*df);
        if (model_path.isEmpty()) return {};
        auto mf = gguf::File::open(model_path.toStdString());
        auto mv = tok::Vocab::from_gguf(*mf);
        const std::string why = sched::vocab_mismatch(*mv, *dv);
        if (!why.empty())
            return QStringLiteral("%1 cannot draft for %2: %3 (a draft must share the model's vocabulary)")
                .arg(QFileInfo(draft_path).fileName(), QFileInfo(model_path).fileName(), qs(why));
        return {};
    } catch (const std::exception& e) {
        return qs(e.what());
    }
}

QVariantMap plan_model(const QString& path, const EngineSettings& settings, uint64_t ram_returned, bool speed) {
    if (const std::string err = settings.validate(); !err.empty()) throw Error("invalid setting: " + err);
    auto m = model::Model::load(path.toStdString(), /*random_access=*/true);
    int64_t pinned = 0;
    if (!settings.pin_file.empty()) pinned = static_cast<int64_t>(core::read_pin_file(settings.pin_file, *m).size());
    memory::PlanSettings ps = core::plan_settings(settings, pinned);
    ps.fast_returned = ram_returned;  // counted only where the budget is automatic (fast_available known)
    const memory::Plan p = memory::make_plan(model::plan_model(*m), ps);
    QVariantMap out = plan_to_map(p);
    out[QStringLiteral("speed")] = QString();
    if (speed && p.fits && p.expert_slots < p.experts_total) {
        const experts::StreamEstimate est = experts::estimate_stream(p, *m, experts::measure_expert_read_rate(*m));
        out[QStringLiteral("speed")] = qs(est.text);
        out[QStringLiteral("speedTokSLow")] = est.low_tok_s;
        out[QStringLiteral("speedTokSHigh")] = est.high_tok_s;
        out[QStringLiteral("diskBytesPerToken")] = est.disk_bytes_per_token;
    }
    out[QStringLiteral("info")] = model_info(*m);
    out[QStringLiteral("path")] = path;
    return out;
}

EngineWorker::EngineWorker(QObject* parent) : QObject(parent) {
    qRegisterMetaType<strata::TelemetrySnapshot>("strata::TelemetrySnapshot");
    tick_ = new QTimer(this);  // a child: moves to the worker thread with it
    tick_->setInterval(0);
    connect(tick_, &QTimer::timeout, this, &EngineWorker::tick);
}

void EngineWorker::shutdown(QThread* owner) {
    unload();
    tick_->stop();
    moveToThread(owner);
}

EngineWorker::~EngineWorker() {
    // The scheduler (and its draft) refer to the engine: it goes first.
    core_.reset();
}

void EngineWorker::post(std::function<void()> fn) {
    QMetaObject::invokeMethod(this, std::move(fn), Qt::QueuedConnection);
}

bool EngineWorker::stopped(quint64 id) const {
    if (id <= stop_up_to_.load()) return true;
    std::lock_guard<std::mutex> lk(stop_mu_);
    return stop_ids_.contains(id);
}

int EngineWorker::max_batch() const { return core_ ? core_->max_batch() : max_batch_; }

void EngineWorker::make_scheduler() {
    end_served(503, QStringLiteral("the engine restarted its scheduler (a setting changed or the model was reloaded); retry"));
    core_.reset();
    if (!engine_) return;
    sched::SchedulerConfig c;
    c.max_batch = max_batch_;
    c.prefill_chunk = kPrefillChunk;  // a long prompt is several steps: commands, telemetry and progress in between
    core_ = std::make_unique<EngineCore>(*engine_, c);
}

void EngineWorker::load(quint64 load_id, const QString& path, const EngineSettings& settings) {
    // One engine at a time: free the old one before the new one is planned
    // against the same memory.
    if (engine_) unload();
    if (load_id <= cancel_load_up_to_.load()) {
        Q_EMIT loadFailed(load_id, QStringLiteral("loading %1 was cancelled").arg(path), true);
        return;
    }
    try {
        auto last = clock_type::now() - std::chrono::seconds(1);
        auto progress = [&](std::string_view stage, double fraction) {
            if (load_id <= cancel_load_up_to_.load()) return false;
            const auto now = clock_type::now();
            if (now - last >= std::chrono::milliseconds(50) || fraction >= 1.0 || stage != "weights") {
                last = now;
                Q_EMIT loadProgress(load_id, QString::fromUtf8(stage.data(), int(stage.size())), fraction);
            }
            return true;
        };
        auto engine = core::Engine::load(path.toStdString(), settings, progress);
        const model::Model& m = engine->model();
        const std::string jinja = m.file().get_string_or("tokenizer.chat_template", "");
        template_ = &engine->chat_template();
        engine_ = std::move(engine);
        make_scheduler();
        model_file_ = QFileInfo(path).fileName();
        model_path_ = path;
        publish_model_card();

        QVariantMap info = model_info(m);
        info[QStringLiteral("path")] = path;
        info[QStringLiteral("fileName")] = model_file_;
        info[QStringLiteral("context")] = qlonglong(engine_->context().n_ctx());
        info[QStringLiteral("kvTokens")] = qlonglong(engine_->kv_cache().params().n_blocks * engine_->kv_cache().params().block_tokens);
        info[QStringLiteral("kvType")] = QString::fromLatin1(kv::kv_type_name(engine_->kv_cache().params().type));
        info[QStringLiteral("template")] =
            template_->uses_jinja() ? QStringLiteral("jinja") : QString::fromLatin1(chat::family_name(template_->family()));
        // Worth a note: no template the app can follow, or the model's own failed (then markers stand in).
        info[QStringLiteral("templateFallback")] = template_->is_fallback() || !template_->jinja_error().empty();
        info[QStringLiteral("templateNote")] =
            jinja.empty() ? QStringLiteral("no chat template in this model: plain transcript format")
                          : QStringLiteral("chat template: %1").arg(qs(template_->describe()));
        // How its calls are written (ChatController reads them when the app offers tools).
        info[QStringLiteral("toolSyntax")] = int(template_->tool_syntax());
        info[QStringLiteral("templateTools")] = template_->renders_tools();
        info[QStringLiteral("plan")] = plan_to_map(engine_->plan());
        logger("app")->info("loaded {} (chat template: {})", path.toStdString(), template_->describe());
        Q_EMIT loaded(load_id, info);
        emit_telemetry();
    } catch (const Cancelled& e) {
        Q_EMIT loadFailed(load_id, qs(e.what()), true);
    } catch (const std::exception& e) {
        logger("app")->warn("load failed: {}", e.what());
        Q_EMIT loadFailed(load_id, qs(e.what()), false);
    }
}

void EngineWorker::abort_all(const QString& why) {
    end_served(503, why);
    // Every request ends now, keeping what it streamed, marked cancelled.
    std::map<quint64, Active> all;
    all.swap(active_);
    for (auto& [id, a] : all) {
        QVariantMap stats;
        stats[QStringLiteral("text")] = qs(a.text);
        stats[QStringLiteral("finish")] = QStringLiteral("cancelled");
        stats[QStringLiteral("promptTokens")] = qlonglong(a.prompt_tokens);
        stats[QStringLiteral("model")] = model_file_;
        stats[QStringLiteral("note")] = why;
        Q_EMIT finished(id, stats);
    }
}

void EngineWorker::unload() {
    const bool had = engine_ != nullptr;
    abort_all(QStringLiteral("the model was unloaded"));
    tick_->stop();
    core_.reset();
    engine_.reset();
    ram_held_.store(0);
    template_ = nullptr;
    model_file_.clear();
    model_path_.clear();
    publish_model_card();
    if (had) Q_EMIT unloaded();
}

void EngineWorker::ensure_ticking() {
    if (!tick_->isActive()) tick_->start();
}

namespace {

// The app's turns as the template reads them (tool calls' arguments as objects, Hugging Face's convention).
std::vector<chat::Message> template_messages(const QList<ChatTurn>& turns) {
    std::vector<chat::Message> messages;
    for (const ChatTurn& t : turns) {
        chat::Message m{t.role.toStdString(), t.content.toStdString()};
        if (!t.tool_calls.isEmpty()) {
            auto calls = nlohmann::ordered_json::parse(t.tool_calls.toStdString(), nullptr, false);
            if (calls.is_array()) {
                for (auto& c : calls)
                    if (c.is_object() && c.contains("function")) c["function"]["arguments"] = chat::call_arguments(c["function"]);
                m.extra["tool_calls"] = std::move(calls);
            }
            if (t.content.isEmpty()) m.extra["content"] = nullptr;
        }
        if (!t.tool_call_id.isEmpty()) m.extra["tool_call_id"] = t.tool_call_id.toStdString();
        if (!t.name.isEmpty()) m.extra["name"] = t.name.toStdString();
        messages.push_back(std::move(m));
    }
    return messages;
}

}  // namespace

void EngineWorker::generate(quint64 id, const QList<ChatTurn>& turns, sched::SamplingParams params, const DraftSettings& draft,
                            const QByteArray& tools_json) {
    if (!engine_) {
        Q_EMIT failed(id, QStringLiteral("no model is loaded: load a model first"), QString());
        return;
    }
    const auto t0 = clock_type::now();
    if (stopped(id)) {
        QVariantMap stats;
        stats[QStringLiteral("text")] = QString();
        stats[QStringLiteral("finish")] = QStringLiteral("cancelled");
        Q_EMIT finished(id, stats);
        return;
    }
    model::Context& ctx = engine_->context();
    try {
        // The conversation as every front end prepares it (chat/prompt.h);
        // here the oldest turns give way when the prompt and room for the
        // answer do not fit.
        const std::vector<chat::Message> messages = template_messages(turns);
        const auto tools = tools_json.isEmpty() ? nlohmann::ordered_json()
                                                : nlohmann::ordered_json::parse(tools_json.toStdString());
        const int64_t n_ctx = ctx.n_ctx();
        const int64_t room = std::min<int64_t>(params.max_tokens, std::max<int64_t>(n_ctx / 4, 1));
        if (!core_) make_scheduler();
        chat::Prompt prompt;
        try {
            prompt = core_->prepare(messages, /*drop_oldest=*/true, room, tools.is_array() ? &tools : nullptr);
        } catch (const chat::PromptError& e) {
            if (e.kind() != chat::PromptError::Kind::TooLong) throw;
            throw Error("the message needs " + std::to_string(e.n_tokens()) + " tokens but the model's context holds " +
                        std::to_string(n_ctx) + "; shorten the message or the system prompt, or raise the context size in Settings");
        }
        std::vector<int32_t> tokens = std::move(prompt.tokens);
        const int dropped = prompt.dropped_messages;
        chat::add_stop_strings(params.stop, prompt.stop);
        // The call syntax's markers, where the vocabulary has them as control tokens, are shown so the calls can be read.
        if (tools.is_array())
            for (std::string_view marker : serve::special_markers(template_->tool_syntax()))
                if (const auto t = engine_->vocab().find(marker); t && engine_->vocab().is_control(*t))
                    params.render_tokens.push_back(*t);
        std::sort(params.render_tokens.begin(), params.render_tokens.end());

        Active a;
        a.t0 = t0;
        a.prompt_tokens = static_cast<int64_t>(tokens.size());
        a.dropped = dropped;
        a.speculative = draft.on();
        EngineCore::Speculation spec;
        if (draft.on()) spec = speculation(draft);
        EngineCore::Callbacks cb{[this, id](std::string_view text) { on_text(id, text); },
                                 [this, id](const sched::RequestResult& r) { on_done(id, r); },
                                 [this, id](const std::string& why) { on_failed(id, why); },
                                 [this, id] { return stopped(id); }};
        a.sid = core_->submit(std::move(tokens), params, std::move(cb), draft.on() ? &spec : nullptr);
        active_[id] = std::move(a);
        logger("app")->debug("request {}: prompt {} tokens{}", id, active_[id].prompt_tokens, draft.on() ? " (speculative)" : "");
        ensure_ticking();
    } catch (const std::exception& e) {
        logger("app")->warn("generation failed: {}", e.what());
        Q_EMIT failed(id, qs(e.what()), QString());
    }
}

void EngineWorker::on_text(quint64 id, std::string_view piece) {
    auto it = active_.find(id);
    if (it == active_.end()) return;
    Active& a = it->second;
    if (a.ttft_ms < 0) a.ttft_ms = std::chrono::duration<double, std::milli>(clock_type::now() - a.t0).count();
    a.text.append(piece);
    if (clock_type::now() - a.sent_at >= std::chrono::milliseconds(kTextBatchMs)) send_text(id, a);
    if (a.speculative) maybe_telemetry();  // it holds the thread for its whole answer: the panels go on
}

void EngineWorker::report_prompt_progress() {
    if (!core_) return;
    const auto now = clock_type::now();
    for (auto& [id, a] : active_) {
        if (a.sid < 0 || a.ttft_ms >= 0 || now - a.progress_at < std::chrono::milliseconds(kProgressMs)) continue;
        const auto p = core_->prompt_progress(a.sid);
        // Prompts read in one or two steps need no progress.
        if (!p || p->second <= 2 * int64_t(kPrefillChunk)) continue;
        a.progress_at = now;
        Q_EMIT promptProgress(id, p->first, p->second);
    }
}

void EngineWorker::send_text(quint64 id, Active& a) {
    if (a.sent >= a.text.size()) return;
    Q_EMIT token(id, QString::fromUtf8(a.text.data() + a.sent, qsizetype(a.text.size() - a.sent)));
    a.sent = a.text.size();
    a.sent_at = clock_type::now();
}

// The engine failed while request `id` ran: it ends with the reason and what it had said.
void EngineWorker::on_failed(quint64 id, const std::string& why) {
    auto it = active_.find(id);
    if (it == active_.end()) return;
    logger("app")->warn("generation failed: {}", why);
    const QString partial = qs(it->second.text);
    active_.erase(it);
    Q_EMIT failed(id, qs(why), partial);
}

void EngineWorker::on_done(quint64 id, const sched::RequestResult& r) {
    auto it = active_.find(id);
    if (it == active_.end()) return;
    send_text(id, it->second);  // the last pieces, before the answer is reported done
    const Active a = std::move(it->second);
    active_.erase(it);
    const double seconds = std::chrono::duration<double>(clock_type::now() - a.t0).count();
    double gaps = 0;
    for (double g : r.itl_s) gaps += g;
    QVariantMap stats;
    stats[QStringLiteral("text")] = qs(r.text);
    stats[QStringLiteral("finish")] = QString::fromLatin1(sched::finish_reason_name(r.finish));
    stats[QStringLiteral("promptTokens")] = qlonglong(r.prompt_tokens);
    stats[QStringLiteral("reusedTokens")] = qlonglong(r.prefix_reused);
    stats[QStringLiteral("droppedMessages")] = a.dropped;
    stats[QStringLiteral("tokens")] = qlonglong(r.tokens.size());
    stats[QStringLiteral("tokS")] = a.speculative ? r.decode_tok_s : gaps > 0 ? double(r.itl_s.size()) / gaps : 0.0;
    stats[QStringLiteral("ttftMs")] = a.ttft_ms >= 0 ? a.ttft_ms : r.ttft_s * 1000.0;
    stats[QStringLiteral("seconds")] = seconds;
    stats[QStringLiteral("model")] = model_file_;
    stats[QStringLiteral("speculative")] = a.speculative;
    stats[QStringLiteral("specAcceptance")] = r.spec_acceptance;
    if (a.speculative) stats[QStringLiteral("specDrafted")] = qlonglong(r.spec_drafted);
    stats[QStringLiteral("preemptions")] = r.preemptions;
    emit_telemetry();  // the panels hold this answer's figures when it is reported done
    Q_EMIT finished(id, stats);
}

EngineCore::Speculation EngineWorker::speculation(const DraftSettings& d) const {
    const model::ModelConfig& c = engine_->model().config();
    EngineCore::Speculation s;
    s.k = std::max(1, d.k);
    if (d.mode == QLatin1String("mtp")) {
        s.draft = "mtp";
    } else if (d.mode == QLatin1String("experts")) {
        if (c.n_expert_used < 2)
            throw Error("a self-draft with fewer experts needs a model that routes to 2 or more experts per token (this one: " +
                        std::to_string(c.n_expert_used) + ")");
        s.draft = "self:experts=" + std::to_string(std::max<int64_t>(1, c.n_expert_used / 2));
    } else if (d.mode == QLatin1String("layers")) {
        if (c.n_layer < 2) throw Error("a self-draft with fewer layers needs a model with 2 or more layers");
        s.draft = "self:layers=" + std::to_string(std::max<int64_t>(1, c.n_layer / 2));
    } else if (d.mode == QLatin1String("file")) {
        if (d.file.isEmpty()) throw Error("speculative decoding with a draft file: choose the draft GGUF in Settings");
        s.draft = d.file.toStdString();
    } else {
        throw Error("unknown draft mode '" + d.mode.toStdString() + "'");
    }
    return s;
}

void EngineWorker::tick() {
    if (!engine_) {
        tick_->stop();
        return;
    }
    // Stops asked for since the last step.
    for (auto it = active_.begin(); it != active_.end();) {
        Active& a = it->second;
        if (a.cancel_sent || !stopped(it->first)) {
            ++it;
            continue;
        }
        a.cancel_sent = true;
        // (A running speculative one polls stopped() itself.) A queued one's
        // `finished` comes at once and erases its entry: go on from its key.
        const quint64 id = it->first;
        if (core_) core_->cancel(a.sid);
        it = active_.upper_bound(id);
    }
    if (core_ && !core_->idle()) {
        // A failed pass ends every request in flight through its `failed`
        // (on_failed; a served one is rejected) and the core starts afresh.
        core_->step();
        remote_.erase(std::remove_if(remote_.begin(), remote_.end(), [](const Served& r) { return r.ch->ended(); }),
                      remote_.end());
        report_prompt_progress();
        maybe_telemetry();
        return;
    }
    // Nothing left to run.
    tick_->stop();
    emit_telemetry();
}

void EngineWorker::maybe_telemetry() {
    if (clock_type::now() - last_telemetry_ >= std::chrono::milliseconds(200)) emit_telemetry();
}

void EngineWorker::set_max_batch(int n) {
    if (n < 1 || n > 4096) {
        Q_EMIT settingApplied(QStringLiteral("batch"), QStringLiteral("max batch %1 is out of range (1..4096)").arg(n));
        return;
    }
    max_batch_ = n;
    if (core_) core_->set_max_batch(n);  // at once when idle, else when the running requests are done
    Q_EMIT settingApplied(QStringLiteral("batch"), QString());
}

void EngineWorker::calibrate(quint64 id, const QString& prompts_file, const QString& out_file) {
    if (!engine_) {
        Q_EMIT calibrationFinished(id, QString(), QStringLiteral("no model is loaded: load a model first"), false, QString());
        return;
    }
    if (!active_.empty()) {
        Q_EMIT calibrationFinished(id, QString(), QStringLiteral("answers are being generated: calibrate when they are done"),
                                   false, QString());
        return;
    }
    try {
        const std::vector<std::string> prompts = read_prompt_file(prompts_file.toStdString());
        core::CalibrationOptions o;
        auto last = clock_type::now() - std::chrono::seconds(1);
        if (!core_) make_scheduler();
        const core::Calibration c = core_->calibrate(prompts, o, [&](size_t done, size_t total) {
            if (id <= cancel_calibration_up_to_.load()) return false;
            const auto now = clock_type::now();
            if (now - last >= std::chrono::milliseconds(100) || done == total) {
                last = now;
                Q_EMIT calibrationProgress(id, int(done), int(total));
                maybe_telemetry();
            }
            return true;
        });
        core::write_calibration(out_file.toStdString(), c);
        const QString summary = QStringLiteral("%1 tokens; pinned %2 of %3 experts, which took %4% of all expert uses")
                                    .arg(c.tokens)
                                    .arg(c.pinned.size())
                                    .arg(c.experts_total)
                                    .arg(100.0 * c.pinned_share, 0, 'f', 1);
        emit_telemetry();
        Q_EMIT calibrationFinished(id, out_file, QString(), false, summary);
    } catch (const Cancelled& e) {
        emit_telemetry();
        Q_EMIT calibrationFinished(id, QString(), qs(e.what()), true, QString());
    } catch (const std::exception& e) {
        emit_telemetry();
        Q_EMIT calibrationFinished(id, QString(), qs(e.what()), false, QString());
    }
}

void EngineWorker::apply_live(const QString& key, const EngineSettings& s) {
    if (!engine_) {
        Q_EMIT settingApplied(key, QString());  // applies on load
        return;
    }
    try {
        if (key == QLatin1String("cache")) {
            if (s.expert_slots > 0) engine_->set_expert_slots(s.expert_slots);
            else if (s.expert_cache_fraction > 0) engine_->set_expert_cache_fraction(s.expert_cache_fraction);
            else engine_->set_expert_slots(engine_->plan().expert_slots);  // automatic: what the plan gave
        } else if (key == QLatin1String("policy")) {
            engine_->set_policy(s.policy);
        } else if (key == QLatin1String("pins")) {
            engine_->set_pin_file(s.pin_file);
        } else if (key == QLatin1String("prefetch")) {
            engine_->set_prefetch(s.prefetch, s.prefetch_width);
        }
        Q_EMIT settingApplied(key, QString());
    } catch (const std::exception& e) {
        Q_EMIT settingApplied(key, qs(e.what()));
    }
    emit_telemetry();
}

void EngineWorker::emit_telemetry() {
    if (!engine_) return;
    last_telemetry_ = clock_type::now();
    ram_held_.store(engine_->ram_returned_on_unload());
    const TelemetrySnapshot snap = engine_->snapshot();
    if (serve_backend_) {
        serve_backend_->set_telemetry(snap);
        serve_backend_->metrics().set_gauges(serve::measure_gauges(*engine_, core_ ? &core_->scheduler() : nullptr));
    }
    Q_EMIT telemetry(snap);
}

// --- serving other clients ---------------------------------------------------

void EngineWorker::set_serve_backend(std::shared_ptr<WorkerBackend> backend) {
    if (!backend) end_served(503, QStringLiteral("the app stopped serving"));
    serve_backend_ = std::move(backend);
    publish_model_card();
}

void EngineWorker::publish_model_card() {
    if (!serve_backend_) return;
    if (!engine_) {
        serve_backend_->set_model(std::nullopt);
        return;
    }
    serve::ModelCard card;
    QString id = model_file_;
    if (id.endsWith(QLatin1String(".gguf"), Qt::CaseInsensitive)) id.chop(5);
    card.id = id.toStdString();
    card.created = QFileInfo(model_path_).lastModified().toSecsSinceEpoch();
    card.n_ctx = engine_->context().n_ctx();
    serve_backend_->set_model(card);
}

void EngineWorker::serve_submit(const serve::CompletionRequest& request, std::shared_ptr<serve::Channel> ch) {
    if (ch->cancelled()) return;
    if (!serve_backend_) {
        ch->reject(serve::ApiError{503, "the app is not serving", "server_error", "", ""});
        return;
    }
    if (!engine_ || !template_) {
        serve_backend_->metrics().rejected(503);
        ch->reject(serve::ApiError{503, "no model is loaded in the app", "server_error", "", "model_not_loaded"});
        return;
    }
    if (!core_) make_scheduler();
    const int limit = core_->max_batch() + kServeQueue;
    if (static_cast<int>(remote_.size()) >= limit) {
        serve_backend_->metrics().rejected(429);
        ch->reject(serve::ApiError{429,
                                   "the app is busy: " + std::to_string(remote_.size()) +
                                       " served requests are running or queued; retry shortly",
                                   "server_busy", "", "queue_full"});
        return;
    }
    try {
        serve::PreparedRequest p = serve::prepare_request(request, engine_->vocab(), *template_,
                                                          engine_->context().n_ctx(), serve_seeds_());
        const auto n_prompt = static_cast<int64_t>(p.tokens.size());
        std::shared_ptr<WorkerBackend> backend = serve_backend_;
        auto on_text = [ch](int64_t, std::string_view text) { ch->text(text); };
        auto on_finish = [ch, backend](const sched::RequestResult& r) {
            const std::string finish = serve::openai_finish(r.finish);
            const auto n = static_cast<int64_t>(r.tokens.size());
            backend->metrics().finished(finish, r.prompt_tokens, n, n > 0 ? r.ttft_s : -1.0);
            backend->metrics().generated(n);
            ch->finish(finish, n);
        };
        auto on_failed = [ch, backend](const std::string& why) {
            backend->metrics().rejected(500);
            ch->reject(serve::ApiError{500, "the engine failed: " + why, "server_error", "", ""});
        };
        const int64_t sid = core_->submit(std::move(p.tokens), p.sampling,
                                          {[ch](std::string_view text) { ch->text(text); }, on_finish, on_failed,
                                           [ch] { return ch->cancelled(); }});
        remote_.push_back({sid, ch});
        ch->set_tool_syntax(template_->tool_syntax());
        ch->accept(n_prompt);
        ensure_ticking();
    } catch (const serve::ApiException& e) {
        serve_backend_->metrics().rejected(e.error.status);
        ch->reject(e.error);
    } catch (const std::exception& e) {
        serve_backend_->metrics().rejected(400);
        ch->reject(serve::ApiError{400, e.what(), "invalid_request_error", "", ""});
    }
}

void EngineWorker::serve_cancelled() {
    if (!core_) return;
    for (const Served& r : remote_)
        if (r.ch->cancelled()) core_->cancel(r.sid);
    ensure_ticking();
}

void EngineWorker::end_served(int status, const QString& why) {
    std::vector<Served> all;
    all.swap(remote_);
    for (Served& r : all) {
        if (r.ch->ended()) continue;
        r.ch->reject(serve::ApiError{status, why.toStdString(), status >= 500 ? "server_error" : "invalid_request_error",
                                     "", ""});
    }
}

}  // namespace strata::desktop
