// The settings pane's model: every engine and sampling setting the engine
// implements, backed by QSettings. setValue() parses and validates a value
// with EngineSettings::validate() / SamplingParams::validate(); an invalid one
// is refused (the stored value stays) and the field's `error` role says why.
//
// Each field says when it takes effect: "live" (the engine's set_* functions,
// applied at once to the loaded model), "next message" (sampling) or "next
// load" (budgets, threads, context size, predictor).
#pragma once

#include <QAbstractListModel>
#include <QSettings>
#include <QStringList>
#include <functional>
#include <memory>

#include "sched/sampler.h"
#include "strata/settings.h"
#include "engine_worker.h"

namespace strata::desktop {

class SettingsModel : public QAbstractListModel {
    Q_OBJECT
    // Per-model defaults: the loaded model's file name ("" with none loaded)
    // and whether defaults are saved for it (and so in force).
    Q_PROPERTY(QString presetModel READ presetModel NOTIFY presetChanged)
    Q_PROPERTY(bool presetActive READ presetActive NOTIFY presetChanged)
public:
    enum Role { KeyRole = Qt::UserRole + 1, LabelRole, GroupRole, KindRole, ValueRole, TextRole, ChoicesRole,
                AppliesRole, HelpRole, ErrorRole, PlaceholderRole };
    enum class Applies { Live, NextMessage, NextLoad };

    // `settings` may be null: a QSettings for organisation "Strata", app "strata".
    explicit SettingsModel(QSettings* settings = nullptr, QObject* parent = nullptr);
    ~SettingsModel() override;

    int rowCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QHash<int, QByteArray> roleNames() const override;

    // Parses, validates and saves. Returns "" when accepted, else the reason
    // (also shown in the field's error role; the previous value stays in force).
    Q_INVOKABLE QString setValue(const QString& key, const QVariant& value);
    Q_INVOKABLE QVariant value(const QString& key) const;
    Q_INVOKABLE QString error(const QString& key) const;
    Q_INVOKABLE QString applies(const QString& key) const;  // "live" | "next message" | "next load"
    Q_INVOKABLE void resetToDefaults();
    Q_INVOKABLE QStringList keys() const;

    // View state remembered between launches (which panels are shown): "ui/<key>".
    Q_INVOKABLE bool uiBool(const QString& key, bool fallback) const;
    Q_INVOKABLE void setUiBool(const QString& key, bool value);
    Q_INVOKABLE QString uiString(const QString& key, const QString& fallback = QString()) const;
    Q_INVOKABLE void setUiString(const QString& key, const QString& value);

    // Per-model defaults ("presets/<model file name>/..."): a system prompt
    // and the sampling settings (preset_keys()), saved for the loaded model
    // and put in force whenever a model of that file name is loaded; a model
    // without them gets the sampling settings as saved under "settings/".
    // While they are in force an edit in the dialog applies at once and is
    // saved as the global value ("settings/"), as any edit is; the model's
    // defaults change only when saved again, and are in force again at its
    // next load.
    QString presetModel() const { return preset_model_; }
    bool presetActive() const;
    // Saves the current sampling settings and `systemPrompt` for the loaded
    // model: "" when saved, else why not (no model loaded).
    Q_INVOKABLE QString savePreset(const QString& systemPrompt);
    // Deletes the loaded model's defaults; the sampling settings saved under
    // "settings/" are in force again.
    Q_INVOKABLE void forgetPreset();
    // The system prompt new conversations start with: the loaded model's saved one, or "".
    QString preset_system_prompt() const;
    // The model file name now loaded ("" when none): its defaults, if any, are
    // put in force (else the global sampling settings). The same name again
    // changes nothing, so a reload keeps the edits made since.
    void set_preset_model(const QString& file_name);
    static QStringList preset_keys();

    // Marks (or clears, with "") an error the engine reported applying a live value.
    void set_error(const QString& key, const QString& error);

    // An extra check for one key's value (e.g. a draft model's vocabulary
    // against the loaded model's): returns "" to accept, else the reason.
    void set_validator(const QString& key, std::function<QString(const QString& value)> check);

    EngineSettings engine_settings() const;
    DraftSettings draft_settings() const;
    sched::SamplingParams sampling_params() const;

    // The app's recent models (newest first, at most 8) and window state live here too.
    QStringList recent_models() const;
    void add_recent_model(const QString& path);
    void remove_recent_model(const QString& path);

    // The live group a key belongs to ("cache", "policy", "pins", "prefetch", "batch"), or "".
    static QString live_group(const QString& key);

Q_SIGNALS:
    // A value was accepted and saved.
    void changed(const QString& key, const QString& applies);
    void presetChanged();

private:
    struct Field;
    int row_of(const QString& key) const;
    QString try_value(const Field& f, const QVariant& v, QVariant* parsed) const;
    EngineSettings engine_from(const QHash<QString, QVariant>& values) const;
    sched::SamplingParams sampling_from(const QHash<QString, QVariant>& values) const;
    QString text_of(const Field& f, const QVariant& v) const;
    QString app_rules(const QHash<QString, QVariant>& values) const;

    std::unique_ptr<QSettings> owned_;
    QSettings* store_;
    QList<Field> fields_;
    QHash<QString, QVariant> values_;
    QHash<QString, QString> errors_;
    QHash<QString, std::function<QString(const QString&)>> validators_;
    QString preset_model_;
    // The preset keys' values as stored under `prefix` ("settings/" or a preset's), each valid or `fallback`'s.
    QHash<QString, QVariant> stored_sampling(const QString& prefix, const QHash<QString, QVariant>& fallback) const;
    void put_sampling(const QHash<QString, QVariant>& next);
};

// "512M", "4G", "1.5GiB", "300000000" -> bytes. false with a message for anything else.
bool parse_size(const QString& text, uint64_t* bytes, QString* error);

}  // namespace strata::desktop
