pragma Singleton
import QtQuick

// Colours, sizes and fonts shared by every view (registered from C++ as the
// Strata.Theme singleton).
QtObject {
    readonly property color window: "#11151b"
    readonly property color surface: "#161b22"
    readonly property color surfaceAlt: "#1c222b"
    readonly property color raised: "#232a35"
    readonly property color hover: "#2a3240"
    readonly property color border: "#2a313c"
    readonly property color text: "#e6e9ef"
    readonly property color textDim: "#a3adba"
    readonly property color textFaint: "#6f7a89"
    readonly property color accent: "#4c9aff"
    readonly property color accentHover: "#63a8ff"
    readonly property color accentSoft: "#1d3250"
    readonly property color danger: "#ef6b6b"
    readonly property color dangerSoft: "#3a1f24"
    readonly property color warning: "#f5a623"
    readonly property color success: "#3ecf8e"
    readonly property color userBubble: "#1f3350"
    readonly property color codeBg: "#0c0f14"
    readonly property color codeHeader: "#151a21"

    readonly property string mono: "DejaVu Sans Mono"
    readonly property int fontSize: 14
    readonly property int small: 12
    readonly property int tiny: 11
    readonly property int title: 16
    readonly property int radius: 8
    readonly property int pad: 12

    // One colour per ledger account, the same wherever an account is drawn.
    function accountColor(account) {
        switch (account) {
        case "weights.shared": return "#4c9aff";
        case "weights.router": return "#9b7bff";
        case "experts.cache": return "#f5a623";
        case "experts.pinned": return "#ff7a59";
        case "kv.pages": return "#3ecf8e";
        case "activations": return "#2bc4d8";
        case "transfer.buffers": return "#d16ba5";
        case "draft.model": return "#b8c255";
        case "runtime.reserve": return "#7b8696";
        case "experts.home": return "#c9884c";
        case "recurrent.state": return "#9bd94f";
        }
        return "#8892a0";
    }

    function appliesColor(applies) {
        if (applies === "live") return success;
        if (applies === "next message") return accent;
        return warning;
    }
}
