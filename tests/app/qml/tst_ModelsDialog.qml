import QtQuick
import QtQuick.Controls
import QtTest
import Strata
import "../../../ui"

// The models folder: a file of an architecture the engine does not run says
// "unsupported" (its line names the architecture), a bad file "unreadable",
// and the model loaded now carries a "Loaded" badge.
Item {
    id: root
    width: 1000
    height: 700

    // What ModelLibrary gives the list (roles) and the dialog (properties).
    ListModel {
        id: library
        property string folder: "/models"
        property bool scanning: false
        property string message: ""
        function rescan() {}
        function setFolder(f) {}
        ListElement {
            path: "/models/demo.gguf"; fileName: "demo.gguf"; subfolder: ""; sizeText: "90 MiB"; quant: "Q8_0"
            arch: "llama"; params: "94M"; experts: "32 experts, top-4"; fit: "resident"; fitNote: "fits: every weight in RAM"
        }
        ListElement {
            path: "/models/mamba.gguf"; fileName: "mamba.gguf"; subfolder: ""; sizeText: "1.2 GiB"; quant: ""
            arch: ""; params: ""; experts: ""; fit: "unsupported"
            fitNote: "unsupported architecture 'mamba': Strata runs llama, qwen2moe, qwen3moe, olmoe, deepseek2, gpt-oss"
        }
        ListElement {
            path: "/models/broken.gguf"; fileName: "broken.gguf"; subfolder: ""; sizeText: "12 B"; quant: ""
            arch: ""; params: ""; experts: ""; fit: "error"; fitNote: "not a GGUF file (bad magic)"
        }
    }
    QtObject {
        id: chat
        property var library: library
        property string modelState: "ready"
        property string modelPath: "/models/demo.gguf"
        property bool remote: false
        function localPath(u) { return String(u) }
    }

    ModelsDialog { id: dialog }

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
    function rows() {
        const list = find(dialog.contentItem, "modelList")
        const out = []
        for (let i = 0; i < list.count; ++i) out.push(list.itemAtIndex(i))
        return out
    }

    TestCase {
        name: "ModelsDialog"
        when: windowShown

        function test_unsupported_is_not_unreadable_and_the_loaded_model_is_marked() {
            dialog.openLibrary()
            tryVerify(() => dialog.opened)
            let r = []
            tryVerify(() => (r = rows()).length === 3 && r.every(x => x !== null))
            compare(find(r[0], "fitLabel").text, "fits")
            compare(find(r[1], "fitLabel").text, "unsupported")
            compare(find(r[2], "fitLabel").text, "unreadable")
            // The loaded model, and only it.
            verify(find(r[0], "loadedBadge").visible)
            verify(!find(r[1], "loadedBadge").visible)
            verify(!find(r[2], "loadedBadge").visible)
            // Chatting with a server, or nothing loaded: no local model is "Loaded".
            chat.remote = true
            verify(!find(r[0], "loadedBadge").visible)
            chat.remote = false
            chat.modelState = "none"
            verify(!find(r[0], "loadedBadge").visible)
            chat.modelState = "ready"
            dialog.close()
        }
    }
}
