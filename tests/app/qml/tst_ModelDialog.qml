import QtQuick
import QtQuick.Controls
import QtTest
import Strata
import "../../../ui"

// The model dialog's plan (issue 45): in a small window a "Does not fit"
// verdict is shown whole (or scrolls), its advice included, clear of the
// table, which keeps a few rows instead of being squeezed away, and nothing
// runs into the buttons; the expected-speed line shows where experts stream
// from disk.
Item {
    id: root
    width: 900
    height: 480

    readonly property string longReason:
        "does not fit: the fast budget of 18.40 GiB is below the resident minimum of 21.07 GiB (weights.shared 1.93 GiB, "
        + "weights.router 2.25 MiB, kv.pages 384.00 MiB for 4096 tokens, activations 220.51 MiB, runtime.reserve 64.00 MiB, "
        + "384 expert slots 18.49 GiB); raise the fast budget to at least 21.07 GiB, or shorten the context; the fast "
        + "budget was automatic (automatic: 20.44 GiB available on this machine minus a 2.04 GiB reserve): free memory, "
        + "or set a fast budget explicitly (beyond what is available the system swaps)"

    QtObject {
        id: chat
        property string planState: "ready"
        property string planError: ""
        property var plan: ({
            path: "/models/big.gguf", fits: false, reason: root.longReason, expertSlots: 384, expertsTotal: 6144,
            cacheFraction: 0.0625, nCtx: 4096, fastTotal: 21.07 * 1073741824, fastBudget: 18.4 * 1073741824,
            fastBudgetAuto: true, fastAvailable: 20.44 * 1073741824, fastReturned: 0, slowTotal: 30e9, slowBudget: 0,
            residentMinimum: 21.07 * 1073741824, speed: "",
            info: { name: "big", arch: "qwen3moe", layers: 48, moeLayers: 48, experts: 128, expertsUsed: 8,
                    paramsTotal: 30.5e9, paramsActive: 3.3e9, bytesTotal: 33e9, recipe: "" },
            rows: [
                { account: "weights.shared", tier: "fast", bytes: 2e9, note: "embeddings" },
                { account: "experts.cache", tier: "fast", bytes: 18e9, note: "384 slots" },
                { account: "kv.pages", tier: "fast", bytes: 4e8, note: "kv" },
                { account: "experts.home", tier: "slow", bytes: 30e9, note: "file" }
            ]
        })
        function planModel(path) {}
    }

    ModelDialog { id: dialog }

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
        name: "ModelDialog"
        when: windowShown

        function test_does_not_fit_verdict_is_whole_with_its_advice() {
            dialog.open()
            tryVerify(() => dialog.opened)
            const box = find(dialog.contentItem, "verdictBox")
            const text = find(dialog.contentItem, "verdict")
            verify(box && text)
            verify(text.text.indexOf("raise the fast budget to at least 21.07 GiB") >= 0)
            waitForRendering(dialog.contentItem)
            // All of the text inside its box (or the box scrolls to it): the
            // text is laid out at its full height within a box that clips.
            verify(text.height >= text.implicitHeight - 0.5, "the verdict is cut: " + text.height + " < " + text.implicitHeight)
            const flick = text.parent.parent  // Flickable's contentItem -> Flickable
            const whole = box.height >= text.implicitHeight + 20 - 0.5
            verify(whole || (flick.contentHeight > flick.height && flick.interactive), "neither whole nor scrollable")
            // Nothing drawn over the items below it.
            const below = find(dialog.contentItem, "planTable")
            const boxBottom = box.mapToItem(dialog.contentItem, 0, box.height).y
            const tableTop = below.mapToItem(dialog.contentItem, 0, 0).y
            verify(boxBottom <= tableTop + 0.5, "the verdict box runs into the table: " + boxBottom + " > " + tableTop)
            verify(below.height >= 80, "the table was squeezed away: " + below.height)
            const tableBottom = below.mapToItem(root, 0, below.height).y
            const buttonsTop = dialog.footer.mapToItem(root, 0, 0).y
            verify(tableBottom <= buttonsTop + 0.5, "the plan runs into the buttons: " + tableBottom + " > " + buttonsTop)
            dialog.close()
        }

        function test_speed_line_where_experts_stream() {
            const p = Object.assign({}, chat.plan)
            p.fits = true
            p.reason = "fits: 18.00 GiB fast of 18.40 GiB"
            p.speed = "Expected speed where experts stream from disk: ≈ 6.1–8.9 tok/s at most: 1.20 GB of experts per token from disk"
            chat.plan = p
            dialog.open()
            tryVerify(() => dialog.opened)
            const line = find(dialog.contentItem, "speedLine")
            verify(line && line.visible)
            compare(line.text, p.speed)
            p.speed = ""
            chat.plan = Object.assign({}, p)
            verify(!line.visible)
            dialog.close()
        }
    }
}
