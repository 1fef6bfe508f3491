#include "telemetry_model.h"

#include <algorithm>

namespace strata::desktop {

namespace {

void push_capped(QList<qreal>& h, qreal v) {
    h.append(v);
    while (h.size() > TelemetryModel::kHistory) h.removeFirst();
}

}  // namespace

TelemetryModel::TelemetryModel(QObject* parent) : QObject(parent) {}

void TelemetryModel::push(const TelemetrySnapshot& s) {
    const bool had = samples_ > 0;
    const TelemetrySnapshot prev = snap_;
    snap_ = s;
    ++samples_;
    // Tokens/s only where tokens ran since the last snapshot (idle snapshots
    // after a setting change add no point to the chart).
    const int64_t dt = s.tokens_processed - prev.tokens_processed;
    const double ds = s.compute_seconds - prev.compute_seconds;
    const bool progressed = had && dt > 0 && ds > 0;
    if (progressed) tok_s_ = double(dt) / ds;
    else if (!had && s.tokens_processed > 0 && s.compute_seconds > 0) tok_s_ = double(s.tokens_processed) / s.compute_seconds;
    if (progressed || (!had && s.tokens_processed > 0)) {
        push_capped(hit_hist_, s.hit_rate_recent);
        push_capped(bytes_hist_, s.bytes_loaded_per_token);
        push_capped(tps_hist_, tok_s_);
    }

    resident_ = pinned_ = loading_ = on_cpu_ = 0;
    for (uint8_t r : s.residency) {
        if (r == 2) ++resident_;
        else if (r == 3) ++pinned_;
        else if (r == 1) ++loading_;
        else if (r == 4) ++on_cpu_;
    }
    max_heat_ = s.heat.empty() ? 0.0 : double(*std::max_element(s.heat.begin(), s.heat.end()));

    ledger_.clear();
    for (const char* tier : {"fast", "slow"}) {
        QVariantList accounts;
        double reserved = 0, used = 0;
        for (const LedgerEntry& e : s.ledger) {
            if (e.tier != tier || (e.reserved == 0 && e.used == 0)) continue;
            QVariantMap a;
            a[QStringLiteral("account")] = QString::fromStdString(e.account);
            a[QStringLiteral("reserved")] = double(e.reserved);
            a[QStringLiteral("used")] = double(e.used);
            accounts.append(a);
            reserved += double(e.reserved);
            used += double(e.used);
        }
        QVariantMap t;
        t[QStringLiteral("tier")] = QString::fromLatin1(tier);
        t[QStringLiteral("description")] = QString::fromStdString(tier[0] == 'f' ? s.fast_tier : s.slow_tier);
        t[QStringLiteral("budget")] = double(tier[0] == 'f' ? s.fast_budget : s.slow_budget);
        t[QStringLiteral("reserved")] = reserved;
        t[QStringLiteral("used")] = used;
        t[QStringLiteral("accounts")] = accounts;
        ledger_.append(t);
    }
    Q_EMIT updated();
}

void TelemetryModel::set_source(const QString& source, const QString& note) {
    if (source == source_ && note == source_note_) return;
    source_ = source;
    source_note_ = note;
    Q_EMIT updated();
}

void TelemetryModel::set_server_figures(const QVariantMap& figures) {
    server_ = figures;
    Q_EMIT updated();
}

void TelemetryModel::record_answer(double tok_s, double ttft_ms, qint64 tokens) {
    if (ttft_ms >= 0) last_ttft_ms_ = ttft_ms;
    if (source_ == QLatin1String("answers") && tokens > 0) {
        ++samples_;
        snap_.tokens_processed += tokens;
        tok_s_ = tok_s;
        push_capped(tps_hist_, tok_s);
    }
    Q_EMIT updated();
}

void TelemetryModel::clear() {
    source_.clear();
    source_note_.clear();
    last_ttft_ms_ = -1;
    server_.clear();
    snap_ = TelemetrySnapshot{};
    samples_ = 0;
    tok_s_ = 0;
    resident_ = pinned_ = loading_ = on_cpu_ = 0;
    max_heat_ = 0;
    ledger_.clear();
    hit_hist_.clear();
    bytes_hist_.clear();
    tps_hist_.clear();
    Q_EMIT updated();
}

QString TelemetryModel::missPaths() const {
    const double all = double(snap_.miss_cpu + snap_.miss_link + snap_.miss_both);
    if (all <= 0) return {};
    auto pct = [&](uint64_t n) { return QString::number(qRound(100.0 * double(n) / all)); };
    return pct(snap_.miss_cpu) + QStringLiteral("% computed on the CPU, ") + pct(snap_.miss_link) +
           QStringLiteral("% copied, ") + pct(snap_.miss_both) + QStringLiteral("% both");
}

QVariantMap TelemetryModel::figures() const {
    QVariantMap m;
    m[QStringLiteral("samples")] = samples_;
    m[QStringLiteral("tokensProcessed")] = qlonglong(snap_.tokens_processed);
    m[QStringLiteral("hitRateTotal")] = snap_.hit_rate_total;
    m[QStringLiteral("hitRateRecent")] = snap_.hit_rate_recent;
    m[QStringLiteral("bytesPerToken")] = snap_.bytes_loaded_per_token;
    m[QStringLiteral("bytesLoaded")] = double(snap_.bytes_loaded);
    m[QStringLiteral("stallFraction")] = snap_.stall_fraction;
    m[QStringLiteral("prefetchPrecision")] = snap_.prefetch_precision;
    m[QStringLiteral("prefetchRecall")] = snap_.prefetch_recall;
    m[QStringLiteral("expertSlots")] = qlonglong(snap_.expert_slots);
    m[QStringLiteral("policy")] = policy();
    m[QStringLiteral("tokensPerSecond")] = tok_s_;
    m[QStringLiteral("nLayer")] = qlonglong(snap_.n_layer);
    m[QStringLiteral("nExpert")] = qlonglong(snap_.n_expert);
    m[QStringLiteral("residentExperts")] = resident_;
    m[QStringLiteral("pinnedExperts")] = pinned_;
    m[QStringLiteral("cpuExperts")] = on_cpu_;
    m[QStringLiteral("placement")] = QString::fromStdString(snap_.placement);
    m[QStringLiteral("missCpu")] = double(snap_.miss_cpu);
    m[QStringLiteral("missLink")] = double(snap_.miss_link);
    m[QStringLiteral("missBoth")] = double(snap_.miss_both);
    m[QStringLiteral("missPaths")] = missPaths();
    m[QStringLiteral("maxHeat")] = max_heat_;
    m[QStringLiteral("ledger")] = ledger_;
    m[QStringLiteral("kernels")] = kernels();
    m[QStringLiteral("repackedBytes")] = repackedBytes();
    auto list = [](const QList<qreal>& h) {
        QVariantList l;
        for (qreal v : h) l.append(v);
        return l;
    };
    m[QStringLiteral("hitRateHistory")] = list(hit_hist_);
    m[QStringLiteral("bytesPerTokenHistory")] = list(bytes_hist_);
    m[QStringLiteral("tokensPerSecondHistory")] = list(tps_hist_);
    m[QStringLiteral("source")] = source_;
    m[QStringLiteral("sourceNote")] = source_note_;
    m[QStringLiteral("lastTtftMs")] = last_ttft_ms_;
    m[QStringLiteral("server")] = server_;
    return m;
}

}  // namespace strata::desktop
