#include "engine_worker.h"

#include <QCoreApplication>
#include <QFileInfo>
#include <QMetaObject>
#include <QThread>
#include <algorithm>

#include "chat/chat_template.h"
#include "common/error.h"
#include "common/log.h"
#include "core/engine.h"
#include "memory/plan.h"
#include "model/model.h"
#include "sched/generator.h"

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
    info[QStringLiteral("name")] = qs(c.name.empty() ? QFileInfo(qs(m.file().path())).completeBaseName().toStdString() : c.name);
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
    return info;
}

}  // namespace

QVariantMap plan_model(const QString& path, const EngineSettings& settings) {
    if (const std::string err = settings.validate(); !err.empty()) throw Error("invalid setting: " + err);
    auto m = model::Model::load(path.toStdString(), /*random_access=*/true);
    int64_t pinned = 0;
    if (!settings.pin_file.empty()) pinned = static_cast<int64_t>(core::read_pin_file(settings.pin_file, *m).size());
    const memory::Plan p = memory::make_plan(*m, core::plan_settings(settings, pinned));
    QVariantMap out = plan_to_map(p);
    out[QStringLiteral("info")] = model_info(*m);
    out[QStringLiteral("path")] = path;
    return out;
}

EngineWorker::EngineWorker(QObject* parent) : QObject(parent) {
    qRegisterMetaType<strata::TelemetrySnapshot>("strata::TelemetrySnapshot");
}

EngineWorker::~EngineWorker() = default;

void EngineWorker::post(std::function<void()> fn) {
    QMetaObject::invokeMethod(this, std::move(fn), Qt::QueuedConnection);
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
        const tok::Vocab& v = m.vocab();
        const std::string jinja = m.file().get_string_or("tokenizer.chat_template", "");
        auto text_of = [&](int32_t id) -> std::string {
            if (id < 0 || id >= v.n_tokens()) return {};
            return v.token_text(id);
        };
        template_ = std::make_unique<chat::ChatTemplate>(chat::ChatTemplate::detect(jinja, text_of(v.bos()), text_of(v.eos())));
        engine_ = std::move(engine);
        cached_.clear();
        model_file_ = QFileInfo(path).fileName();

        QVariantMap info = model_info(m);
        info[QStringLiteral("path")] = path;
        info[QStringLiteral("fileName")] = model_file_;
        info[QStringLiteral("context")] = qlonglong(engine_->context().n_ctx());
        info[QStringLiteral("template")] = QString::fromLatin1(chat::family_name(template_->family()));
        info[QStringLiteral("templateFallback")] = template_->is_fallback();
        info[QStringLiteral("templateNote")] =
            template_->is_fallback()
                ? (jinja.empty() ? QStringLiteral("no chat template in this model: plain transcript format")
                                 : QStringLiteral("chat template not recognised: plain transcript format"))
                : QStringLiteral("chat template: %1").arg(QString::fromLatin1(chat::family_name(template_->family())));
        info[QStringLiteral("plan")] = plan_to_map(engine_->plan());
        logger("app")->info("loaded {} ({})", path.toStdString(), chat::family_name(template_->family()));
        Q_EMIT loaded(load_id, info);
        emit_telemetry();
    } catch (const Cancelled& e) {
        Q_EMIT loadFailed(load_id, qs(e.what()), true);
    } catch (const std::exception& e) {
        logger("app")->warn("load failed: {}", e.what());
        Q_EMIT loadFailed(load_id, qs(e.what()), false);
    }
}

void EngineWorker::unload() {
    const bool had = engine_ != nullptr;
    engine_.reset();
    template_.reset();
    cached_.clear();
    model_file_.clear();
    if (had) Q_EMIT unloaded();
}

void EngineWorker::generate(quint64 id, const QList<ChatTurn>& turns, sched::SamplingParams params) {
    if (!engine_) {
        Q_EMIT failed(id, QStringLiteral("no model is loaded: load a model first"), QString());
        return;
    }
    const auto t0 = clock_type::now();
    QVariantMap stats;
    if (stopped(id)) {
        stats[QStringLiteral("text")] = QString();
        stats[QStringLiteral("finish")] = QStringLiteral("cancelled");
        Q_EMIT finished(id, stats);
        return;
    }
    model::Context& ctx = engine_->context();
    const tok::Vocab& vocab = engine_->vocab();
    std::string text_so_far;
    try {
        // The conversation: system prompt first, then the turns; the oldest
        // turns give way when the prompt and room for the answer do not fit.
        std::vector<chat::Message> system, dialog;
        for (const ChatTurn& t : turns) {
            chat::Message m{t.role.toStdString(), t.content.toStdString()};
            (m.role == "system" ? system : dialog).push_back(std::move(m));
        }
        const int64_t n_ctx = ctx.n_ctx();
        const int64_t room = std::min<int64_t>(params.max_tokens, std::max<int64_t>(n_ctx / 4, 1));
        int dropped = 0;
        std::vector<int32_t> tokens;
        for (;;) {
            std::vector<chat::Message> all = system;
            all.insert(all.end(), dialog.begin(), dialog.end());
            tokens = vocab.encode(template_->render(all, true), /*add_special=*/true, /*parse_special=*/true);
            // A template that spells out BOS, encoded with BOS added: keep one.
            if (tokens.size() >= 2 && tokens[0] == vocab.bos() && tokens[1] == vocab.bos()) tokens.erase(tokens.begin());
            if (static_cast<int64_t>(tokens.size()) + room <= n_ctx) break;
            // Drop the oldest exchange (up to the next user turn); keep the last user turn.
            size_t cut = 1;
            while (cut < dialog.size() && dialog[cut].role != "user") ++cut;
            if (cut >= dialog.size()) break;
            dialog.erase(dialog.begin(), dialog.begin() + static_cast<std::ptrdiff_t>(cut));
            dropped += static_cast<int>(cut);
        }
        if (static_cast<int64_t>(tokens.size()) >= n_ctx - 1) {
            throw Error("the message needs " + std::to_string(tokens.size()) + " tokens but the model's context holds " +
                        std::to_string(n_ctx) + "; shorten the message or the system prompt, or raise the context size in Settings");
        }
        for (const std::string& s : template_->stop_strings())
            if (!s.empty() && std::find(params.stop.begin(), params.stop.end(), s) == params.stop.end()) params.stop.push_back(s);

        // KV cache reuse: keep the longest prefix the context already holds.
        size_t keep = 0;
        const size_t held = std::min(cached_.size(), static_cast<size_t>(ctx.n_past()));
        while (keep < held && keep < tokens.size() && cached_[keep] == tokens[keep]) ++keep;
        if (keep == tokens.size()) --keep;  // at least one token must run to get logits
        // The sampler's penalty window holds the tokens generate() is given:
        // feed at least the window's worth again so the answer is the one a
        // fresh context would give.
        if (params.penalties_active()) {
            const size_t window = params.penalty_last_n < 0 ? tokens.size() : static_cast<size_t>(params.penalty_last_n);
            keep = std::min(keep, tokens.size() > window ? tokens.size() - window : size_t{0});
        }
        ctx.truncate(static_cast<int64_t>(keep));
        cached_.resize(keep);
        logger("app")->debug("prompt {} tokens, {} cached, {} reused", tokens.size(), held, keep);
        const std::vector<int32_t> rest(tokens.begin() + static_cast<std::ptrdiff_t>(keep), tokens.end());

        double ttft_ms = -1;
        last_telemetry_ = clock_type::now();
        auto sink = [&](std::string_view piece) {
            const auto now = clock_type::now();
            if (ttft_ms < 0) ttft_ms = std::chrono::duration<double, std::milli>(now - t0).count();
            text_so_far.append(piece);
            Q_EMIT token(id, QString::fromUtf8(piece.data(), int(piece.size())));
            if (now - last_telemetry_ >= std::chrono::milliseconds(200)) emit_telemetry();
            return !stopped(id);
        };
        cached_.clear();  // until we know what the context holds
        const sched::GenerationResult r = sched::generate(ctx, vocab, params, rest, sink, nullptr);
        cached_ = tokens;
        cached_.insert(cached_.end(), r.tokens.begin(), r.tokens.end());
        cached_.resize(std::min(cached_.size(), static_cast<size_t>(ctx.n_past())));

        const double seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
        stats[QStringLiteral("text")] = qs(r.text);
        stats[QStringLiteral("finish")] = QString::fromLatin1(sched::finish_reason_name(r.finish));
        stats[QStringLiteral("promptTokens")] = qlonglong(tokens.size());
        stats[QStringLiteral("reusedTokens")] = qlonglong(keep);
        stats[QStringLiteral("droppedMessages")] = dropped;
        stats[QStringLiteral("tokens")] = qlonglong(r.tokens.size());
        stats[QStringLiteral("tokS")] = r.decode_tok_s();
        stats[QStringLiteral("ttftMs")] = ttft_ms >= 0 ? ttft_ms : seconds * 1000.0;
        stats[QStringLiteral("seconds")] = seconds;
        stats[QStringLiteral("model")] = model_file_;
        emit_telemetry();
        Q_EMIT finished(id, stats);
    } catch (const std::exception& e) {
        // The context may hold anything now: start the next request afresh.
        ctx.clear();
        cached_.clear();
        logger("app")->warn("generation failed: {}", e.what());
        emit_telemetry();
        Q_EMIT failed(id, qs(e.what()), qs(text_so_far));
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
    Q_EMIT telemetry(engine_->snapshot());
}

}  // namespace strata::desktop
