#include "settings_model.h"

#include <QRandomGenerator>
#include <QRegularExpression>

#include "backend/device.h"

#include <QFileInfo>
#include <QUrl>
#include <algorithm>
#include <cmath>
#include <limits>
#include <thread>

namespace strata::desktop {

struct SettingsModel::Field {
    QString key, label, group, kind;  // kind: size | int | real | choice | bool | file
    QVariant def;
    QStringList choices;
    Applies applies;
    QString help, placeholder;
    bool optional = false;            // real: empty allowed (stored as -1)
    double lo = -std::numeric_limits<double>::infinity(), hi = std::numeric_limits<double>::infinity();
};

namespace {

QString applies_name(SettingsModel::Applies a) {
    switch (a) {
        case SettingsModel::Applies::Live: return QStringLiteral("live");
        case SettingsModel::Applies::NextMessage: return QStringLiteral("next message");
        case SettingsModel::Applies::NextLoad: return QStringLiteral("next load");
    }
    return {};
}

}  // namespace

bool parse_size(const QString& text_in, uint64_t* bytes, QString* error) {
    const QString text = text_in.trimmed();
    static const QString examples = QStringLiteral(" (examples: 512M, 4G, 1.5GiB)");
    int i = 0;
    while (i < text.size() && (text[i].isDigit() || text[i] == QLatin1Char('.'))) ++i;
    bool ok = false;
    const double v = text.left(i).toDouble(&ok);
    if (!ok || i == 0) {
        *error = QStringLiteral("'%1' is not a size").arg(text) + examples;
        return false;
    }
    const QString unit = text.mid(i).trimmed().toUpper();
    if (unit.isEmpty() && v != 0) {
        // 1024 typed as a budget meant 1 KiB before: a bare number is refused, with the units.
        *error = QStringLiteral("'%1' has no unit: type %1M for MiB or %1G for GiB (K, M, G, T; B for bytes)").arg(text);
        return false;
    }
    double mul = 1;
    if (unit.isEmpty() || unit == QLatin1String("B")) mul = 1;
    else if (unit == QLatin1String("K") || unit == QLatin1String("KB") || unit == QLatin1String("KIB")) mul = 1024.0;
    else if (unit == QLatin1String("M") || unit == QLatin1String("MB") || unit == QLatin1String("MIB")) mul = 1024.0 * 1024;
    else if (unit == QLatin1String("G") || unit == QLatin1String("GB") || unit == QLatin1String("GIB")) mul = 1024.0 * 1024 * 1024;
    else if (unit == QLatin1String("T") || unit == QLatin1String("TB") || unit == QLatin1String("TIB")) mul = 1024.0 * 1024 * 1024 * 1024;
    else {
        *error = QStringLiteral("unknown unit '%1' (use K, M, G or T)").arg(text.mid(i).trimmed());
        return false;
    }
    const double b = v * mul;
    if (!(b < 1.8e19)) {
        *error = QStringLiteral("'%1' is too large").arg(text);
        return false;
    }
    *bytes = static_cast<uint64_t>(b);
    return true;
}

SettingsModel::SettingsModel(QSettings* settings, QObject* parent) : QAbstractListModel(parent) {
    if (!settings) {
        owned_ = std::make_unique<QSettings>(QStringLiteral("Strata"), QStringLiteral("strata"));
        settings = owned_.get();
    }
    store_ = settings;
    using A = Applies;
    const QString mem = QStringLiteral("Memory"), cache = QStringLiteral("Expert cache"), samp = QStringLiteral("Sampling");
    auto f = [&](QString key, QString label, QString group, QString kind, QVariant def, A applies, QString help,
                 QString placeholder = {}) {
        Field x;
        x.key = key;
        x.label = label;
        x.group = group;
        x.kind = kind;
        x.def = def;
        x.applies = applies;
        x.help = help;
        x.placeholder = placeholder;
        fields_.append(x);
        return &fields_.last();
    };
    f("fast_budget", "Fast-tier budget", mem, "size", QString(), A::NextLoad,
      "Memory the engine may hold for shared weights, expert cache, KV cache and scratch: RAM, or VRAM on a GPU. "
      "Empty: automatic, what is available when the model loads minus a reserve (a tenth, 512 MiB to 4 GiB), so a "
      "model that fits runs fully resident. 'none': no budget. A size with its unit: 512M, 8G.", "automatic");
    f("slow_budget", "Slow-tier budget", mem, "size", QString(), A::NextLoad,
      "Where the experts live when they are not cached: the model file on a CPU-only machine. A model whose experts "
      "exceed it is refused with the reason. Empty: no budget. A size with its unit: 64G, 1T.", "none");
    {
        // auto, cpu, and each GPU this machine has (About says why there is none).
        QStringList devices = {QStringLiteral("auto"), QStringLiteral("cpu")};
        for (const backend::GpuInfo& g : backend::probe_devices().gpus) devices << QStringLiteral("cuda:%1").arg(g.index);
        f("device", "Device", mem, "choice", "auto", A::NextLoad,
          "Where the model runs. auto: the GPU when there is one (its VRAM is then the fast tier) and it computes what "
          "the CPU computes on the first tokens; else the CPU. Help > About says which and why.")
            ->choices = devices;
    }
    f("cpu_moe_layers", "Experts on the CPU (layers)", mem, "int", 0, A::NextLoad,
      "On a GPU: the experts of the first N MoE layers are computed on the CPU from RAM while the rest runs on the "
      "GPU, so they need no VRAM (as llama.cpp's --n-cpu-moe). 0: none; -1: every MoE layer. No effect on the CPU.")
        ->lo = -1;
    fields_.last().hi = 1 << 20;
    f("placement", "Missing experts (GPU)", mem, "choice", "auto", A::NextLoad,
      "On a GPU whose VRAM holds only some experts, an expert the router picks that is not there. auto: computed on "
      "the CPU from RAM while the GPU computes the rest, or copied to VRAM, whichever the rates measured at load say "
      "is faster for it (a hot expert is also copied for later). transfer: always copied. No effect on the CPU.")
        ->choices = {QStringLiteral("auto"), QStringLiteral("transfer")};
    f("n_ctx", "Context size", mem, "int", 0, A::NextLoad, "Tokens of conversation the model sees. 0: the model's own, at most 4096. At most what the model was "
      "trained on.")
        ->lo = 0;
    fields_.last().hi = 1 << 20;
    f("threads", "Compute threads", mem, "int", 0, A::NextLoad, "0: all cores. At most the machine's hardware threads.")
        ->lo = 0;
    f("kv_tokens", "KV cache size (tokens)", mem, "int", 0, A::NextLoad,
      "Keys and values of every conversation, shared in blocks of 16 tokens; earlier turns stay cached for the next "
      "one. 0: one context's worth. Raise it so several conversations generate at once without recomputing.")
        ->lo = 0;
    fields_.last().hi = 1 << 22;
    f("kv_type", "KV cache type", mem, "choice", "f32", A::NextLoad,
      "f32: exact. q8: int8 with per-block scales, a quarter of the memory.")->choices = {"f32", "q8"};
    f("expert_cache_fraction", "Expert cache size", cache, "real", -1.0, A::Live,
      "Share of all experts that get a cache slot, in (0, 1]. Empty: every expert that fits the budget. On the CPU it "
      "applies at once; on a GPU at once up to the slots reserved in VRAM at load, a larger cache at the next load.",
      "automatic")->optional = true;
    fields_.last().lo = 0.0;
    fields_.last().hi = 1.0;
    f("policy", "Eviction policy", cache, "choice", "lru", A::Live,
      "Which expert leaves the cache first: least recently used, least frequently used (with aging), ARC, or "
      "pinned experts only (needs a pin file).")->choices = {"lru", "lfu", "arc", "pinned"};
    f("pin_file", "Pin file", cache, "file", QString(), A::Live,
      "Hot-expert list written by 'strata-cli calibrate': those experts never leave the cache in RAM (on the CPU; "
      "a GPU's cache ranks every slot by the policy). Empty: none.", "none");
    f("prefetch", "Prefetch", cache, "bool", true, A::Live, "Load the next layer's predicted experts while this layer computes.");
    f("prefetch_width", "Prefetch width", cache, "int", 0, A::Live, "Experts prefetched per layer. 0: the model's top-k.");
    f("predictor", "Predictor", cache, "choice", "lookahead", A::NextLoad,
      "How prefetch guesses: the next layer's router applied early (lookahead), recent-token frequency, or both.")
        ->choices = {"lookahead", "frequency", "combined"};
    const QString serve = QStringLiteral("Generation");
    f("max_batch", "Max batch", serve, "int", 4, A::Live,
      "Answers generated at once (continuous batching: one forward pass serves them all). A change applies when the "
      "answers under way are done.")->lo = 1;
    fields_.last().hi = 64;
    f("spec_draft", "Speculative decoding", serve, "choice", "off", A::NextMessage,
      "A cheap draft proposes tokens that the model checks in one pass. Self-drafts reuse the model's own weights "
      "(half its experts per token, or its first half of layers); the MTP block is the multi-token-prediction "
      "layer some files carry (GLM-4.5, Qwen3.5); a draft file is a smaller GGUF with the same vocabulary. "
      "Speculative decoding runs one conversation at a time.")
        ->choices = {"off", "self: fewer experts", "self: fewer layers", "self: MTP block", "draft file"};
    f("spec_draft_file", "Draft model file", serve, "file", QString(), A::NextMessage,
      "A GGUF with the model's vocabulary, used when Speculative decoding is 'draft file'.", "none");
    f("spec_k", "Draft tokens per round", serve, "int", 4, A::NextMessage,
      "Tokens the draft proposes before the model checks them (adapts between 1 and twice this).")->lo = 1;
    fields_.last().hi = 16;
    f("tools", "Tools", serve, "bool", false, A::NextMessage,
      "Let the model call the app's tools while it answers: a calculator and the clock (computed here; no files, "
      "no network). The calls and their results are shown above the answer. The tools go to the model in its own "
      "chat template's format (or as plain instructions where the template has none), which lengthens every prompt "
      "by a few hundred tokens; a model not trained to call tools may ignore them. With a server (Remote), they "
      "are sent as OpenAI tools and the server's calls are run here.");
    f("temperature", "Temperature", samp, "real", 0.8, A::NextMessage, "0: greedy (always the most likely token).");
    f("top_k", "Top-k", samp, "int", 40, A::NextMessage, "Keep the k most likely tokens. 0: off.");
    f("top_p", "Top-p", samp, "real", 0.95, A::NextMessage, "Nucleus: the smallest set reaching this probability. 1: off.");
    f("min_p", "Min-p", samp, "real", 0.05, A::NextMessage, "Drop tokens below this share of the top token's probability. 0: off.");
    f("repeat_penalty", "Repeat penalty", samp, "real", 1.0, A::NextMessage, "Above 1 discourages repeating the last 64 tokens. 1: off.");
    f("max_tokens", "Max answer tokens", samp, "int", 256, A::NextMessage, "The most tokens one answer may have.");
    f("seed", "Seed", samp, "int", -1, A::NextMessage,
      "-1: a new random seed for every answer, so Regenerate gives another one. 0 or more: the same seed and "
      "prompt give the same answer.")->lo = -1;

    for (const Field& x : fields_) {
        QVariant parsed;
        const QVariant stored = store_->value(QStringLiteral("settings/") + x.key, x.def);
        // A stored value that no longer validates (edited by hand, older version) falls back to the default.
        if (!try_value(x, stored, &parsed).isEmpty()) try_value(x, x.def, &parsed);
        values_[x.key] = parsed;
    }
    // The defaults together must validate too (e.g. "pinned" without a pin file).
    if (!app_rules(values_).isEmpty()) values_[QStringLiteral("spec_draft")] = QStringLiteral("off");
    if (!engine_from(values_).validate().empty() || !sampling_from(values_).validate().empty()) {
        for (const Field& x : fields_) {
            QVariant parsed;
            try_value(x, x.def, &parsed);
            values_[x.key] = parsed;
        }
    }
}

SettingsModel::~SettingsModel() = default;

int SettingsModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : int(fields_.size()); }

QString SettingsModel::text_of(const Field& f, const QVariant& v) const {
    if (f.kind == QLatin1String("real") && f.optional && v.toDouble() < 0) return {};
    if (f.kind == QLatin1String("bool")) return v.toBool() ? QStringLiteral("on") : QStringLiteral("off");
    return v.toString();
}

QVariant SettingsModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || index.row() < 0 || index.row() >= fields_.size()) return {};
    const Field& f = fields_[index.row()];
    switch (role) {
        case KeyRole: return f.key;
        case Qt::DisplayRole:
        case LabelRole: return f.label;
        case GroupRole: return f.group;
        case KindRole: return f.kind;
        case ValueRole: return values_.value(f.key);
        case TextRole: return text_of(f, values_.value(f.key));
        case ChoicesRole: return f.choices;
        case AppliesRole: return applies_name(f.applies);
        case HelpRole: return f.help;
        case ErrorRole: return errors_.value(f.key);
        case PlaceholderRole: return f.placeholder;
    }
    return {};
}

QHash<int, QByteArray> SettingsModel::roleNames() const {
    return {{KeyRole, "key"},     {LabelRole, "label"},     {GroupRole, "group"},   {KindRole, "kind"},
            {ValueRole, "value"}, {TextRole, "text"},       {ChoicesRole, "choices"}, {AppliesRole, "applies"},
            {HelpRole, "help"},   {ErrorRole, "error"},     {PlaceholderRole, "placeholder"}};
}

int SettingsModel::row_of(const QString& key) const {
    for (int i = 0; i < fields_.size(); ++i)
        if (fields_[i].key == key) return i;
    return -1;
}

QString SettingsModel::try_value(const Field& f, const QVariant& v, QVariant* parsed) const {
    const QString text = v.toString().trimmed();
    if (f.kind == QLatin1String("size")) {
        if (text.isEmpty()) {
            *parsed = QString();
            return {};
        }
        if (text.compare(QLatin1String("none"), Qt::CaseInsensitive) == 0) {
            *parsed = QStringLiteral("none");
            return {};
        }
        uint64_t b = 0;
        QString err;
        if (!parse_size(text, &b, &err)) return err;
        if (b == 0) return QStringLiteral("a zero budget holds nothing (leave it empty for %1, or type none)")
                               .arg(f.placeholder);
        *parsed = text;
        return {};
    }
    if (f.kind == QLatin1String("int")) {
        bool ok = false;
        const qlonglong n = v.typeId() == QMetaType::QString ? text.toLongLong(&ok) : v.toLongLong(&ok);
        if (!ok || (v.typeId() != QMetaType::QString && v.toDouble() != double(n)))
            return QStringLiteral("'%1' is not a whole number").arg(text);
        if (double(n) < f.lo || double(n) > f.hi)
            return QStringLiteral("%1 is out of range (%2 to %3)").arg(n).arg(qlonglong(f.lo)).arg(qlonglong(f.hi));
        if (f.key == QLatin1String("threads")) {
            // More compute threads than the machine runs at once only wait on each other (issue 45: 64 on 2 cores).
            const qlonglong hw = std::max(1u, std::thread::hardware_concurrency());
            if (n > hw)
                return QStringLiteral("%1 threads, but this machine runs %2 hardware threads at once: more only wait for "
                                      "each other; use at most %2 (0: all of them)")
                    .arg(n)
                    .arg(hw);
        }
        *parsed = n;
        return {};
    }
    if (f.kind == QLatin1String("real")) {
        if (text.isEmpty() && f.optional) {
            *parsed = -1.0;
            return {};
        }
        bool ok = false;
        const double d = v.typeId() == QMetaType::QString ? text.toDouble(&ok) : v.toDouble(&ok);
        if (!ok || !std::isfinite(d)) return QStringLiteral("'%1' is not a number").arg(text);
        // -1 is how an empty optional value is stored; typed, a negative number is refused (it used to
        // be taken silently as "automatic" while the field kept showing -1).
        if (f.optional && d == -1.0 && v.typeId() != QMetaType::QString) {
            *parsed = -1.0;
            return {};
        }
        if (d < f.lo || d > f.hi) {
            return QStringLiteral("%1 is out of range (%2 to %3)%4")
                .arg(text)
                .arg(f.lo)
                .arg(f.hi)
                .arg(f.optional ? QStringLiteral("; leave it empty for %1").arg(f.placeholder) : QString());
        }
        *parsed = d;
        return {};
    }
    if (f.kind == QLatin1String("choice")) {
        if (!f.choices.contains(text)) return QStringLiteral("'%1' is not one of %2").arg(text, f.choices.join(QStringLiteral(", ")));
        *parsed = text;
        return {};
    }
    if (f.kind == QLatin1String("bool")) {
        if (v.typeId() == QMetaType::Bool) {
            *parsed = v.toBool();
            return {};
        }
        const QString t = text.toLower();
        if (t == QLatin1String("true") || t == QLatin1String("on") || t == QLatin1String("1")) *parsed = true;
        else if (t == QLatin1String("false") || t == QLatin1String("off") || t == QLatin1String("0")) *parsed = false;
        else return QStringLiteral("'%1' is not on or off").arg(text);
        return {};
    }
    if (f.kind == QLatin1String("file")) {
        QString path = text;
        if (path.startsWith(QLatin1String("file://"))) path = QUrl(path).toLocalFile();
        if (!path.isEmpty()) {
            const QFileInfo fi(path);
            if (!fi.exists()) return QStringLiteral("%1: no such file").arg(path);
            if (!fi.isFile() || !fi.isReadable()) return QStringLiteral("%1: not a readable file").arg(path);
            path = fi.absoluteFilePath();
        }
        *parsed = path;
        return {};
    }
    return QStringLiteral("unknown setting");
}

EngineSettings SettingsModel::engine_from(const QHash<QString, QVariant>& v) const {
    EngineSettings s;
    uint64_t b = 0;
    QString err;
    // fast: empty = automatic (0), "none" = no budget; slow: empty or "none" = no budget (0).
    const QString fb = v.value(QStringLiteral("fast_budget")).toString();
    if (fb == QLatin1String("none")) s.fast_budget = kNoBudget;
    else if (!fb.isEmpty() && parse_size(fb, &b, &err)) s.fast_budget = b;
    const QString sb = v.value(QStringLiteral("slow_budget")).toString();
    if (!sb.isEmpty() && sb != QLatin1String("none") && parse_size(sb, &b, &err)) s.slow_budget = b;
    s.n_ctx = v.value(QStringLiteral("n_ctx")).toLongLong();
    s.device = v.value(QStringLiteral("device")).toString().toStdString();
    s.cpu_moe_layers = v.value(QStringLiteral("cpu_moe_layers")).toLongLong();
    s.placement = v.value(QStringLiteral("placement")).toString().toStdString();
    s.threads = int(v.value(QStringLiteral("threads")).toLongLong());
    const double frac = v.value(QStringLiteral("expert_cache_fraction")).toDouble();
    s.expert_cache_fraction = frac < 0 ? -1.0 : frac;
    s.policy = v.value(QStringLiteral("policy")).toString().toStdString();
    s.pin_file = v.value(QStringLiteral("pin_file")).toString().toStdString();
    s.prefetch = v.value(QStringLiteral("prefetch")).toBool();
    s.prefetch_width = int(v.value(QStringLiteral("prefetch_width")).toLongLong());
    s.predictor = v.value(QStringLiteral("predictor")).toString().toStdString();
    s.kv_tokens = v.value(QStringLiteral("kv_tokens")).toLongLong();
    s.kv_type = v.value(QStringLiteral("kv_type")).toString().toStdString();
    return s;
}

sched::SamplingParams SettingsModel::sampling_from(const QHash<QString, QVariant>& v) const {
    sched::SamplingParams p;
    p.temperature = float(v.value(QStringLiteral("temperature")).toDouble());
    p.top_k = int32_t(std::clamp<qlonglong>(v.value(QStringLiteral("top_k")).toLongLong(), -2, 1 << 30));
    p.top_p = float(v.value(QStringLiteral("top_p")).toDouble());
    p.min_p = float(v.value(QStringLiteral("min_p")).toDouble());
    p.repeat_penalty = float(v.value(QStringLiteral("repeat_penalty")).toDouble());
    const qlonglong mt = v.value(QStringLiteral("max_tokens")).toLongLong();
    p.max_tokens = int32_t(std::clamp<qlonglong>(mt, -1, std::numeric_limits<int32_t>::max()));
    // As GPT4All and LM Studio: without a fixed seed each answer draws its own.
    const qlonglong seed = v.value(QStringLiteral("seed")).toLongLong();
    p.seed = seed < 0 ? QRandomGenerator::global()->generate64() : uint64_t(seed);
    return p;
}

QString SettingsModel::setValue(const QString& key, const QVariant& value) {
    const int row = row_of(key);
    if (row < 0) return QStringLiteral("unknown setting '%1'").arg(key);
    const Field& f = fields_[row];
    QVariant parsed;
    QString err = try_value(f, value, &parsed);
    if (err.isEmpty()) {
        QHash<QString, QVariant> next = values_;
        next[key] = parsed;
        const std::string e1 = engine_from(next).validate();
        const std::string e2 = sampling_from(next).validate();
        err = QString::fromStdString(!e1.empty() ? e1 : e2);
        // The engine names settings by their internal keys; the user knows them by their labels.
        for (const Field& x : fields_)
            if (x.key.contains(QLatin1Char('_')))
                err.replace(QRegularExpression(QStringLiteral("\\b%1\\b").arg(x.key)), QLatin1Char('\'') + x.label + QLatin1Char('\''));
        if (err.isEmpty()) err = app_rules(next);
        if (err.isEmpty() && validators_.contains(key)) err = validators_[key](parsed.toString());
    }
    if (!err.isEmpty()) {
        errors_[key] = err;
        Q_EMIT dataChanged(index(row), index(row), {ErrorRole});
        return err;
    }
    const bool same = values_.value(key) == parsed;
    errors_.remove(key);
    values_[key] = parsed;
    store_->setValue(QStringLiteral("settings/") + key, parsed);
    Q_EMIT dataChanged(index(row), index(row), {ValueRole, TextRole, ErrorRole});
    if (!same) Q_EMIT changed(key, applies_name(f.applies));
    return {};
}

QVariant SettingsModel::value(const QString& key) const { return values_.value(key); }
QString SettingsModel::error(const QString& key) const { return errors_.value(key); }

QString SettingsModel::applies(const QString& key) const {
    const int row = row_of(key);
    return row < 0 ? QString() : applies_name(fields_[row].applies);
}

QStringList SettingsModel::keys() const {
    QStringList k;
    for (const Field& f : fields_) k << f.key;
    return k;
}

void SettingsModel::resetToDefaults() {
    for (const Field& f : fields_) {
        QVariant parsed;
        try_value(f, f.def, &parsed);
        const bool same = values_.value(f.key) == parsed;
        values_[f.key] = parsed;
        store_->remove(QStringLiteral("settings/") + f.key);
        errors_.remove(f.key);
        if (!same) Q_EMIT changed(f.key, applies_name(f.applies));
    }
    if (!fields_.isEmpty()) Q_EMIT dataChanged(index(0), index(int(fields_.size()) - 1));
}

void SettingsModel::set_error(const QString& key, const QString& error) {
    const int row = row_of(key);
    if (row < 0) return;
    if (error.isEmpty()) errors_.remove(key);
    else errors_[key] = error;
    Q_EMIT dataChanged(index(row), index(row), {ErrorRole});
}

QString SettingsModel::app_rules(const QHash<QString, QVariant>& v) const {
    if (v.value(QStringLiteral("spec_draft")).toString() == QLatin1String("draft file") &&
        v.value(QStringLiteral("spec_draft_file")).toString().isEmpty())
        return QStringLiteral("speculative decoding with a draft file needs the file: choose the Draft model file first");
    return {};
}

void SettingsModel::set_validator(const QString& key, std::function<QString(const QString&)> check) {
    validators_[key] = std::move(check);
}

DraftSettings SettingsModel::draft_settings() const {
    DraftSettings d;
    const QString m = values_.value(QStringLiteral("spec_draft")).toString();
    d.mode = m == QLatin1String("self: fewer experts") ? QStringLiteral("experts")
           : m == QLatin1String("self: fewer layers")  ? QStringLiteral("layers")
           : m == QLatin1String("self: MTP block")     ? QStringLiteral("mtp")
           : m == QLatin1String("draft file")          ? QStringLiteral("file")
                                                       : QStringLiteral("off");
    d.file = values_.value(QStringLiteral("spec_draft_file")).toString();
    d.k = int(values_.value(QStringLiteral("spec_k")).toLongLong());
    return d;
}

EngineSettings SettingsModel::engine_settings() const { return engine_from(values_); }
sched::SamplingParams SettingsModel::sampling_params() const { return sampling_from(values_); }

bool SettingsModel::uiBool(const QString& key, bool fallback) const {
    const QVariant v = store_->value(QStringLiteral("ui/") + key);
    if (!v.isValid()) return fallback;
    const QString t = v.toString().toLower();
    return t == QLatin1String("true") || t == QLatin1String("1");
}

void SettingsModel::setUiBool(const QString& key, bool value) { store_->setValue(QStringLiteral("ui/") + key, value); }

QString SettingsModel::uiString(const QString& key, const QString& fallback) const {
    return store_->value(QStringLiteral("ui/") + key, fallback).toString();
}

void SettingsModel::setUiString(const QString& key, const QString& value) { store_->setValue(QStringLiteral("ui/") + key, value); }

QStringList SettingsModel::recent_models() const {
    return store_->value(QStringLiteral("models/recent")).toStringList();
}

void SettingsModel::add_recent_model(const QString& path) {
    QStringList r = recent_models();
    r.removeAll(path);
    r.prepend(path);
    while (r.size() > 8) r.removeLast();
    store_->setValue(QStringLiteral("models/recent"), r);
}

void SettingsModel::remove_recent_model(const QString& path) {
    QStringList r = recent_models();
    r.removeAll(path);
    store_->setValue(QStringLiteral("models/recent"), r);
}

QString SettingsModel::live_group(const QString& key) {
    if (key == QLatin1String("expert_cache_fraction")) return QStringLiteral("cache");
    if (key == QLatin1String("policy")) return QStringLiteral("policy");
    if (key == QLatin1String("pin_file")) return QStringLiteral("pins");
    if (key == QLatin1String("prefetch") || key == QLatin1String("prefetch_width")) return QStringLiteral("prefetch");
    if (key == QLatin1String("max_batch")) return QStringLiteral("batch");
    return {};
}

QStringList SettingsModel::preset_keys() {
    return {QStringLiteral("temperature"), QStringLiteral("top_k"),          QStringLiteral("top_p"),
            QStringLiteral("min_p"),       QStringLiteral("repeat_penalty"), QStringLiteral("max_tokens")};
}

namespace {
QString preset_prefix(const QString& model) { return QStringLiteral("presets/") + model + QLatin1Char('/'); }
}  // namespace

bool SettingsModel::presetActive() const {
    return !preset_model_.isEmpty() && store_->contains(preset_prefix(preset_model_) + QStringLiteral("saved"));
}

QString SettingsModel::preset_system_prompt() const {
    if (!presetActive()) return {};
    return store_->value(preset_prefix(preset_model_) + QStringLiteral("system_prompt")).toString();
}

QHash<QString, QVariant> SettingsModel::stored_sampling(const QString& prefix, const QHash<QString, QVariant>& fallback) const {
    QHash<QString, QVariant> out = fallback;
    for (const QString& key : preset_keys()) {
        const int row = row_of(key);
        const QVariant stored = store_->value(prefix + key);
        QVariant parsed;
        if (row >= 0 && stored.isValid() && try_value(fields_[row], stored, &parsed).isEmpty()) out[key] = parsed;
    }
    return out;
}

void SettingsModel::put_sampling(const QHash<QString, QVariant>& next) {
    for (const QString& key : preset_keys()) {
        const int row = row_of(key);
        if (row < 0 || values_.value(key) == next.value(key)) continue;
        values_[key] = next.value(key);
        errors_.remove(key);
        Q_EMIT dataChanged(index(row), index(row), {ValueRole, TextRole, ErrorRole});
        Q_EMIT changed(key, applies_name(fields_[row].applies));
    }
}

void SettingsModel::set_preset_model(const QString& file_name) {
    if (file_name == preset_model_) return;
    preset_model_ = file_name;
    // The global values (each default where none is stored), then the model's over them.
    QHash<QString, QVariant> defaults;
    for (const QString& key : preset_keys()) {
        QVariant parsed;
        try_value(fields_[row_of(key)], fields_[row_of(key)].def, &parsed);
        defaults[key] = parsed;
    }
    const QHash<QString, QVariant> global = stored_sampling(QStringLiteral("settings/"), defaults);
    QHash<QString, QVariant> next = values_;
    for (auto it = global.begin(); it != global.end(); ++it) next[it.key()] = it.value();
    if (presetActive()) {
        QHash<QString, QVariant> with = stored_sampling(preset_prefix(preset_model_), global);
        QHash<QString, QVariant> all = values_;
        for (auto it = with.begin(); it != with.end(); ++it) all[it.key()] = it.value();
        // Saved values that no longer validate together are not put in force.
        if (sampling_from(all).validate().empty()) next = all;
    }
    put_sampling(next);
    Q_EMIT presetChanged();
}

QString SettingsModel::savePreset(const QString& systemPrompt) {
    if (preset_model_.isEmpty())
        return QStringLiteral("No model is loaded: defaults are saved for the loaded model's file.");
    const QString prefix = preset_prefix(preset_model_);
    for (const QString& key : preset_keys()) store_->setValue(prefix + key, values_.value(key));
    store_->setValue(prefix + QStringLiteral("system_prompt"), systemPrompt.trimmed());
    store_->setValue(prefix + QStringLiteral("saved"), true);
    Q_EMIT presetChanged();
    return {};
}

void SettingsModel::forgetPreset() {
    if (!presetActive()) return;
    store_->remove(preset_prefix(preset_model_).chopped(1));
    const QString model = preset_model_;
    preset_model_.clear();
    set_preset_model(model);  // the global values again
}

}  // namespace strata::desktop
