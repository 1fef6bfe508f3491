import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Strata

// Tokens per second over time (forward-pass tokens per second of
// forward-pass time, between two snapshots; for a server that reports no
// engine, each answer's decode rate as measured here).
Panel {
    id: panel
    title: "Throughput"
    subtitle: !telemetry.hasData ? ""
              : telemetry.source === "answers" ? TextUtil.formatCount(telemetry.tokensProcessed) + " tokens in its answers"
              : TextUtil.formatCount(telemetry.tokensProcessed) + " tokens since load, "
                + telemetry.computeSeconds.toFixed(1) + " s computing"

    Label {
        visible: !telemetry.hasData
        text: "No model loaded."
        color: Theme.textFaint
        font.pixelSize: Theme.small
    }
    RowLayout {
        visible: telemetry.hasData
        Layout.fillWidth: true
        spacing: 14
        ColumnLayout {
            Layout.preferredWidth: 110
            spacing: 6
            // The local engine's rate while it generates; idle, the last rate is
            // named as such and dimmed (frozen at its last value it read as live).
            Stat {
                objectName: "tokensPerSecondStat"
                readonly property bool idle: telemetry.source === "engine" && !chat.anyGenerating
                caption: idle ? "tokens/s, last answer" : "tokens/s"
                value: telemetry.tokensPerSecond > 0 ? telemetry.tokensPerSecond.toFixed(1) : "–"
                valueColor: idle ? Theme.textDim : Theme.accentHover
            }
            Stat {
                objectName: "perTokenStat"
                visible: telemetry.source !== "answers" && telemetry.tokensPerSecond > 0
                caption: "per token"
                value: (1000 / telemetry.tokensPerSecond).toFixed(1) + " ms"
            }
            Stat {
                // A server's answers, as measured here (the local engine's TTFT is under each answer).
                visible: telemetry.source === "answers" || telemetry.source === "server"
                caption: "time to first token"
                value: telemetry.lastTtftMs >= 0 ? telemetry.lastTtftMs.toFixed(0) + " ms" : "–"
            }
        }
        LineChart {
            Layout.fillWidth: true
            implicitHeight: 76
            values: telemetry.tokensPerSecondHistory
            format: "number"
            color: Theme.accent
            gridColor: Theme.border
            textColor: Theme.textFaint
        }
    }
    // A Strata server's queue, as its /metrics reports it.
    Label {
        objectName: "serverLine"
        visible: telemetry.source === "server" && telemetry.server.kvTotal !== undefined
        Layout.fillWidth: true
        wrapMode: Text.Wrap
        color: Theme.textFaint
        font.pixelSize: Theme.small
        text: visible ? "Server: " + telemetry.server.running + " generating, " + telemetry.server.waiting + " waiting, KV "
                        + telemetry.server.kvUsed + "/" + telemetry.server.kvTotal + " blocks, "
                        + telemetry.server.tokensPerSecond.toFixed(1) + " tok/s over 10 s"
                        + (telemetry.server.ttftMeanMs >= 0 ? ", mean TTFT " + telemetry.server.ttftMeanMs.toFixed(0) + " ms" : "")
                      : ""
    }
}
