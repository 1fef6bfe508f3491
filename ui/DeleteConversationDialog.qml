import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Strata

// "Delete this conversation?", in the app's dark style as its other dialogs
// (it had Qt's plain light one). Set conversationId, conversationTitle and
// count, then open(); Delete calls chat.deleteConversation.
Dialog {
    id: deleteDialog
    objectName: "deleteDialog"
    property var conversationId: 0
    property string conversationTitle: ""
    property var count: 0
    parent: Overlay.overlay
    anchors.centerIn: parent
    modal: true
    width: 440
    title: "Delete this conversation?"
    padding: 20
    topPadding: 14
    background: Rectangle { color: Theme.surface; radius: 10; border.color: Theme.border }
    header: DialogHeader { text: deleteDialog.title }
    Label {
        width: parent.width
        wrapMode: Text.Wrap
        color: Theme.textDim
        text: "“" + deleteDialog.conversationTitle + "” and its " + deleteDialog.count
              + (deleteDialog.count === 1 ? " message" : " messages") + " will be deleted. This cannot be undone."
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
            objectName: "confirmDelete"
            text: "Delete"
            highlighted: true
            DialogButtonBox.buttonRole: DialogButtonBox.AcceptRole
        }
    }
    onAccepted: chat.deleteConversation(conversationId)
}
