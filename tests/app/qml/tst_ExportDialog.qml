import QtQuick
import QtQuick.Controls
import QtTest
import "../../../ui"

// The export dialog offers a full path in a real folder, and exports to
// exactly the path in its field, typed or not.
Item {
    id: window
    width: 960
    height: 600

    QtObject {
        id: chat
        function localPath(url) { return url.toString().replace("file://", "") }
    }

    ExportDialog { id: dialog }
    SignalSpy { id: spy; target: dialog; signalName: "exportRequested" }

    function find(item, name) {
        if (!item) return null
        if (item.objectName === name) return item
        const kids = item.children || []
        for (let i = 0; i < kids.length; ++i) {
            const f = find(kids[i], name)
            if (f) return f
        }
        return null
    }

    TestCase {
        name: "ExportDialog"
        when: windowShown

        function test_exports_to_the_exact_path() {
            dialog.openFor("json", "/home/someone/Documents/Commandments.json")
            tryVerify(() => dialog.opened)
            const field = find(dialog.contentItem, "exportPath")
            compare(field.text, "/home/someone/Documents/Commandments.json")
            compare(field.selectedText, "Commandments")  // the name, ready to be typed over
            compare(dialog.title, "Export the conversation as JSON")
            field.text = "/srv/other dir/notes #1.json"
            mouseClick(find(dialog.footer, "exportButton"))
            compare(spy.count, 1)
            compare(spy.signalArguments[0][0], "json")
            compare(spy.signalArguments[0][1], "/srv/other dir/notes #1.json")
            tryVerify(() => !dialog.visible)
        }

        function test_folder_change_keeps_the_name() {
            compare(dialog.folderOf("/a/b/c.md"), "/a/b")
            compare(dialog.nameOf("/a/b/c.md"), "c.md")
        }
    }
}
