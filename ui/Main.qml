import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import QtQuick.Dialogs
import Strata

// The main window: conversations (left), the chat (centre), the engine's
// panels (right), a tool bar with the model, panels, settings and help.
ApplicationWindow {
    id: root
    width: 1280
    height: 800
    minimumWidth: 960
    minimumHeight: 600
    visible: true
    title: chat.currentTitle.length > 0 ? chat.currentTitle + " — Strata" : "Strata"
    color: Theme.window
    font.pixelSize: Theme.fontSize

    palette.window: Theme.window
    palette.windowText: Theme.text
    palette.base: Theme.surfaceAlt
    palette.alternateBase: Theme.surface
    palette.text: Theme.text
    palette.button: Theme.raised
    palette.buttonText: Theme.text
    palette.brightText: "#ffffff"
    palette.highlight: Theme.accent
    palette.highlightedText: "#ffffff"
    palette.light: Theme.hover
    palette.midlight: Theme.raised
    palette.mid: Theme.border
    palette.dark: Theme.window
    palette.shadow: "#000000"
    palette.placeholderText: Theme.textFaint
    palette.toolTipBase: Theme.raised
    palette.toolTipText: Theme.text
    palette.link: Theme.accentHover

    // Which panels are shown: remembered between launches (appSettings "ui/...").
    property bool showPanels: appSettings.uiBool("showPanels", true)
    property bool showLedger: appSettings.uiBool("showLedger", true)
    property bool showHeat: appSettings.uiBool("showHeat", true)
    property bool showCache: appSettings.uiBool("showCache", true)
    property bool showThroughput: appSettings.uiBool("showThroughput", true)
    function togglePanel(name) {
        root[name] = !root[name]
        appSettings.setUiBool(name, root[name])
    }

    // Automation: every panel open for the screenshot.
    function showAllPanels() {
        showPanels = showLedger = showHeat = showCache = showThroughput = true
    }
    // Automation (--show): open a dialog before the screenshot.
    function showDialog(name) {
        if (name === "settings") settingsDialog.open()
        else if (name === "remote") remoteDialog.open()
        else if (name === "model") planAndShow(chat.modelPath)
        else if (name === "models") modelsDialog.openLibrary()
        else if (name === "about") aboutDialog.open()
    }
    Component.onCompleted: if (unattended) showAllPanels()

    function chooseModel() { modelsDialog.openLibrary() }
    function planAndShow(url) {
        chat.planModel(url)
        modelDialog.open()
    }

    Shortcuts {
        generating: chat.generating
        onQuitRequested: Qt.quit()
        onNewChatRequested: chat.newConversation()
        onSettingsRequested: settingsDialog.open()
        onStopRequested: chat.stop()
        onCopyLastAnswerRequested: {
            for (let i = chat.messages.rowCount() - 1; i >= 0; --i) {
                const m = chat.messages.get(i)
                if (m.role === "assistant") {
                    TextUtil.copyToClipboard(m.content)
                    chat.showNotice("The last answer was copied.")
                    return
                }
            }
        }
    }

    header: TopBar {
        onLoadModelRequested: root.chooseModel()
        onRecentModelChosen: (path) => root.planAndShow(path)
        onRemoteRequested: remoteDialog.open()
        onSettingsRequested: settingsDialog.open()
        onAboutRequested: aboutDialog.open()
        showPanels: root.showPanels
        onShowPanelsToggled: root.togglePanel("showPanels")
        onReloadRequested: root.planAndShow(chat.modelPath)
    }

    RowLayout {
        anchors.fill: parent
        spacing: 0

        // Narrow windows give the chat the room: the side columns shrink
        // (at 960 px the chat keeps ~470 px instead of ~300).
        ConversationPane {
            objectName: "conversationPane"
            Layout.preferredWidth: root.width < 1200 ? 200 : 260
            Layout.fillHeight: true
        }
        Rectangle { Layout.fillHeight: true; implicitWidth: 1; color: Theme.border }
        ChatPane {
            id: chatPane
            Layout.fillWidth: true
            Layout.fillHeight: true
            onLoadModelRequested: root.chooseModel()
            onExportRequested: (kind) => exportDialog.openFor(kind, chat.exportFolder() + "/" + chat.suggestedFileName(kind === "json" ? "json" : "md"))
            onSettingsRequested: settingsDialog.open()
        }
        Rectangle { Layout.fillHeight: true; implicitWidth: 1; color: Theme.border; visible: root.showPanels }
        PanelsPane {
            objectName: "panelsPane"
            Layout.preferredWidth: root.width < 1200 ? 320 : 400
            Layout.fillHeight: true
            visible: root.showPanels
            showLedger: root.showLedger
            showHeat: root.showHeat
            showCache: root.showCache
            showThroughput: root.showThroughput
            onToggle: (name) => root.togglePanel(name)
        }
    }

    ModelDialog {
        id: modelDialog
        onLoadRequested: (path) => chat.loadModel(path)
        onSettingsRequested: settingsDialog.open()
    }
    SettingsDialog {
        id: settingsDialog
        onReloadRequested: root.planAndShow(chat.modelPath)
    }
    RemoteDialog { id: remoteDialog }
    AboutDialog { id: aboutDialog }

    ModelsDialog {
        id: modelsDialog
        onModelChosen: (path) => root.planAndShow(path)
    }
    ExportDialog {
        id: exportDialog
        onExportRequested: (kind, path) => chat.exportToPath(kind, path)
    }
}
