// Reading reference outputs in the fixtures' layout (M.ref.jsonl + M.logits.f32,
// also used for the demo model's trainer-exported references), and greedy
// argmax, shared by the suites that compare the engine against them.
#pragma once

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QString>

#include <cstdint>
#include <cstring>
#include <vector>

namespace strata::test {

struct RefPrompt {
    QString prompt;
    std::vector<int32_t> tokens;   // BOS + tokenization
    int64_t offset_rows = 0;       // first logits row of this prompt
    std::vector<int32_t> greedy;
    QString greedy_text;
    bool has_text = false;         // greedy_text is null where the bytes are not UTF-8
};

inline std::vector<int32_t> json_ids(const QJsonArray& a) {
    std::vector<int32_t> v;
    for (const auto& x : a) v.push_back(x.toInt());
    return v;
}

inline std::vector<RefPrompt> read_refs(const QString& path) {
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) qFatal("cannot open %s", qPrintable(path));
    std::vector<RefPrompt> out;
    for (const QByteArray& line : f.readAll().split('\n')) {
        if (line.trimmed().isEmpty()) continue;
        const QJsonObject o = QJsonDocument::fromJson(line).object();
        RefPrompt r;
        // Some reference files keep prompts.txt's line as it is, where a
        // literal \n stands for a newline (the fixtures README); the tokens
        // were made from the newline.
        r.prompt = o["prompt"].toString().replace(QStringLiteral("\\n"), QStringLiteral("\n"));
        r.tokens = json_ids(o["tokens"].toArray());
        r.offset_rows = o["logits_offset_rows"].toInteger();
        r.greedy = json_ids(o["greedy"].toArray());
        r.has_text = o["greedy_text"].isString();
        r.greedy_text = o["greedy_text"].toString();
        out.push_back(r);
    }
    return out;
}

// Little-endian float32 rows.
inline std::vector<float> read_floats(const QString& path) {
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) qFatal("cannot open %s", qPrintable(path));
    const QByteArray b = f.readAll();
    std::vector<float> v(static_cast<size_t>(b.size()) / 4);
    std::memcpy(v.data(), b.constData(), v.size() * 4);
    return v;
}

inline int32_t argmax(const float* x, int64_t n) {
    int32_t best = 0;
    for (int64_t i = 1; i < n; ++i)
        if (x[i] > x[best]) best = static_cast<int32_t>(i);
    return best;
}

}  // namespace strata::test
