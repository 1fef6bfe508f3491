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
              : TextUtil.formatCount(telemetry.tokensProcessed) + " tokens since load"

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
            Stat {
                caption: "tokens/s"
                value: telemetry.tokensPerSecond > 0 ? telemetry.tokensPerSecond.toFixed(1) : "–"
                valueColor: Theme.accentHover
            }
            Stat {
                visible: telemetry.source !== "answers"
                caption: "forward-pass time"
                value: telemetry.computeSeconds.toFixed(2) + " s"
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
