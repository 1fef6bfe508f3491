import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import QtQuick.Dialogs
import Strata

// Export a conversation: the full path of the file to write, editable, in
// the folder of the last export (else Documents); "Choose folder…" changes
// the folder and keeps the file name. Emits exportRequested(kind, path) with
// exactly the path shown (Qt's own save dialog kept only a typed path's file
// name, opened in the app's hidden data folder and said "Open").
Dialog {
    id: dialog
    property string kind: "markdown"
    property string path: ""
    signal exportRequested(string kind, string path)

    parent: Overlay.overlay
    anchors.centerIn: parent
    width: Math.min(640, (parent ? parent.width : 640) - 40)
    modal: true
    title: kind === "json" ? "Export the conversation as JSON" : "Export the conversation as Markdown"
    padding: 20
    topPadding: 14
    background: Rectangle { color: Theme.surface; radius: 10; border.color: Theme.border }
    header: DialogHeader { text: dialog.title; subtitle: "The file is written at this path; an existing file is replaced." }

    // Opens with `file` (a full path) in the field.
    function openFor(k, file) {
        kind = k
        path = file
        pathField.text = file
        open()
        pathField.forceActiveFocus()
        // Select the name without its extension, as save dialogs do.
        const slash = file.lastIndexOf("/") + 1
        const dot = file.lastIndexOf(".")
        pathField.select(slash, dot > slash ? dot : file.length)
    }
    function folderOf(p) { const i = p.lastIndexOf("/"); return i > 0 ? p.substring(0, i) : "/" }
    function nameOf(p) { return p.substring(p.lastIndexOf("/") + 1) }
    function submit() {
        const p = pathField.text.trim()
        if (p.length === 0) return
        dialog.exportRequested(dialog.kind, p)
        dialog.close()
    }

    ColumnLayout {
        width: parent.width
        spacing: 8
        Label { text: "Save to"; color: Theme.textDim; font.pixelSize: Theme.small }
        RowLayout {
            Layout.fillWidth: true
            spacing: 8
            StrataTextField {
                id: pathField
                objectName: "exportPath"
                Layout.fillWidth: true
                selectByMouse: true
                onAccepted: dialog.submit()
            }
            StrataButton {
                text: "Choose folder…"
                onClicked: {
                    folderDialog.currentFolder = "file://" + dialog.folderOf(pathField.text.trim())
                    folderDialog.open()
                }
            }
        }
    }

    footer: DialogButtonBox {
        background: Rectangle { color: "transparent" }
        padding: 16
        StrataButton {
            text: "Cancel"
            flat: true
            DialogButtonBox.buttonRole: DialogButtonBox.RejectRole
        }
        StrataButton {
            objectName: "exportButton"
            text: "Export"
            highlighted: true
            enabled: pathField.text.trim().length > 0
            onClicked: dialog.submit()
        }
    }

    FolderDialog {
        id: folderDialog
        title: "Choose the folder to export to"
        onAccepted: {
            const folder = chat.localPath(selectedFolder)
            pathField.text = (folder.endsWith("/") ? folder : folder + "/") + dialog.nameOf(pathField.text.trim())
        }
    }
}
