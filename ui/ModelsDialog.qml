import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import QtQuick.Dialogs
import Strata

// "Load model…": the GGUF files of the models folder, each with its size,
// quantization, experts and whether it fits this machine (the plan a load
// would make, under the current settings); a file anywhere else by its path.
// Choosing one shows its memory plan (ModelDialog) before loading.
Dialog {
    id: dialog
    signal modelChosen(string path)

    parent: Overlay.overlay
    anchors.centerIn: parent
    width: Math.min(820, (parent ? parent.width : 820) - 40)
    height: Math.min(620, (parent ? parent.height : 620) - 40)
    modal: true
    title: "Models"
    padding: 20
    topPadding: 14
    background: Rectangle { color: Theme.surface; radius: 10; border.color: Theme.border }
    header: DialogHeader {
        text: "Models"
        subtitle: "GGUF files in the models folder and its subfolders, planned against this machine's memory"
    }

    readonly property var library: chat.library

    function openLibrary() {
        folderField.text = library.folder
        library.rescan()
        open()
    }
    function choose(path) {
        dialog.close()
        dialog.modelChosen(path)
    }
    function fitColor(fit) {
        return fit === "resident" ? Theme.success : fit === "cache" ? Theme.warning
             : fit === "" || fit === "unsupported" ? Theme.textFaint : Theme.danger
    }
    // "unsupported": a good file of an architecture the engine does not run
    // (the row's second line names it); "unreadable": the file itself is bad.
    function fitText(fit) {
        return fit === "resident" ? "fits" : fit === "cache" ? "fits, cached" : fit === "no" ? "too large"
             : fit === "unsupported" ? "unsupported" : fit === "error" ? "unreadable" : "planning…"
    }
    // The model the engine has loaded now (not while chatting with a server).
    function isLoaded(path) {
        return chat.modelState === "ready" && !chat.remote && path === chat.modelPath
    }

    ColumnLayout {
        anchors.fill: parent
        spacing: 10

        RowLayout {
            Layout.fillWidth: true
            spacing: 8
            Label { text: "Folder"; color: Theme.textDim }
            StrataTextField {
                id: folderField
                objectName: "folderField"
                Layout.fillWidth: true
                selectByMouse: true
                onAccepted: dialog.library.setFolder(text)
            }
            StrataButton {
                text: "Choose…"
                onClicked: {
                    folderDialog.currentFolder = "file://" + dialog.library.folder
                    folderDialog.open()
                }
            }
            StrataButton {
                objectName: "rescanButton"
                text: dialog.library.scanning ? "Planning…" : "Rescan"
                enabled: !dialog.library.scanning
                onClicked: dialog.library.setFolder(folderField.text)
            }
        }
        Label {
            objectName: "libraryMessage"
            Layout.fillWidth: true
            visible: text.length > 0
            text: dialog.library.message
            wrapMode: Text.Wrap
            color: dialog.library.count === 0 ? Theme.warning : Theme.textDim
            font.pixelSize: Theme.small
        }

        ListView {
            id: list
            objectName: "modelList"
            Layout.fillWidth: true
            Layout.fillHeight: true
            clip: true
            model: dialog.library
            spacing: 2
            ScrollBar.vertical: ScrollBar {}
            delegate: Rectangle {
                id: row
                required property int index
                required property string path
                required property string fileName
                required property string subfolder
                required property string sizeText
                required property var quant
                required property var arch
                required property string params
                required property string experts
                required property string fit
                required property string fitNote
                objectName: "modelRow"
                width: ListView.view.width
                height: 54
                radius: 6
                color: rowMouse.containsMouse ? Theme.hover : "transparent"
                RowLayout {
                    anchors.fill: parent
                    anchors.leftMargin: 10
                    anchors.rightMargin: 10
                    spacing: 12
                    ColumnLayout {
                        Layout.fillWidth: true
                        spacing: 2
                        Label {
                            Layout.fillWidth: true
                            text: row.fileName + (row.subfolder.length > 0 ? "   " : "")
                            elide: Text.ElideMiddle
                            color: Theme.text
                            font.weight: Font.Medium
                        }
                        Label {
                            Layout.fillWidth: true
                            elide: Text.ElideRight
                            color: Theme.textDim
                            font.pixelSize: Theme.small
                            text: (row.subfolder.length > 0 ? row.subfolder + "/ · " : "")
                                  + (row.arch ? [row.quant, row.arch, row.params + " params", row.experts].filter(s => !!s).join(" · ")
                                              : row.fitNote)
                        }
                    }
                    Rectangle {
                        objectName: "loadedBadge"
                        visible: dialog.isLoaded(row.path)
                        implicitWidth: loadedLabel.implicitWidth + 14
                        implicitHeight: loadedLabel.implicitHeight + 6
                        radius: 4
                        color: Theme.accent
                        Label {
                            id: loadedLabel
                            anchors.centerIn: parent
                            text: "Loaded"
                            color: "white"
                            font.pixelSize: Theme.tiny
                            font.weight: Font.DemiBold
                        }
                    }
                    Label {
                        objectName: "sizeLabel"
                        text: row.sizeText
                        color: Theme.textDim
                        font.pixelSize: Theme.small
                    }
                    Rectangle {
                        objectName: "fitBadge"
                        implicitWidth: fitLabel.implicitWidth + 14
                        implicitHeight: fitLabel.implicitHeight + 6
                        radius: 4
                        color: "transparent"
                        border.color: dialog.fitColor(row.fit)
                        Label {
                            id: fitLabel
                            objectName: "fitLabel"
                            anchors.centerIn: parent
                            text: dialog.fitText(row.fit)
                            color: dialog.fitColor(row.fit)
                            font.pixelSize: Theme.tiny
                        }
                        ToolTip.visible: badgeMouse.containsMouse
                        ToolTip.text: row.fitNote
                        MouseArea { id: badgeMouse; anchors.fill: parent; hoverEnabled: true; acceptedButtons: Qt.NoButton }
                    }
                }
                MouseArea {
                    id: rowMouse
                    anchors.fill: parent
                    hoverEnabled: true
                    z: -1
                    onClicked: dialog.choose(row.path)
                }
            }
        }

        // A file outside the folder: by its path (or Qt's file dialog).
        RowLayout {
            Layout.fillWidth: true
            spacing: 8
            Label { text: "Or a file"; color: Theme.textDim }
            StrataTextField {
                id: fileField
                objectName: "fileField"
                Layout.fillWidth: true
                selectByMouse: true
                placeholderText: "/path/to/model.gguf"
                onAccepted: if (text.trim().length > 0) dialog.choose(text.trim())
            }
            StrataButton {
                text: "Open"
                enabled: fileField.text.trim().length > 0
                onClicked: dialog.choose(fileField.text.trim())
            }
            StrataButton {
                text: "Browse…"
                onClicked: fileDialog.open()
            }
        }
    }

    footer: DialogButtonBox {
        background: Rectangle { color: "transparent" }
        padding: 16
        StrataButton {
            text: "Close"
            flat: true
            DialogButtonBox.buttonRole: DialogButtonBox.RejectRole
        }
    }

    FolderDialog {
        id: folderDialog
        title: "Choose the folder your GGUF models are in"
        onAccepted: {
            folderField.text = chat.localPath(selectedFolder)
            dialog.library.setFolder(folderField.text)
        }
    }
    FileDialog {
        id: fileDialog
        title: "Load a GGUF model"
        nameFilters: ["GGUF models (*.gguf)", "All files (*)"]
        onAccepted: dialog.choose(chat.localPath(selectedFile))
    }
}
