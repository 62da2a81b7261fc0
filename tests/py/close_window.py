"""Asks the X window titled TITLE to close, as a window manager's close button does: a
WM_DELETE_WINDOW client message (the app decides what closing means; nothing is killed).
Run with the system python (python3-xlib) on the test's display: close_window.py TITLE.
Prints how many windows it asked."""

import sys

from Xlib import X, display, protocol

title = sys.argv[1]
d = display.Display()
root = d.screen().root
delete = d.intern_atom("WM_DELETE_WINDOW")
protocols = d.intern_atom("WM_PROTOCOLS")
asked = 0


def walk(w):
    global asked
    try:
        name = w.get_wm_name()
        children = w.query_tree().children
    except Exception:  # noqa: BLE001 - windows come and go while we look
        return
    if name == title and delete in (w.get_wm_protocols() or []):
        ev = protocol.event.ClientMessage(window=w, client_type=protocols,
                                          data=(32, [delete, X.CurrentTime, 0, 0, 0]))
        w.send_event(ev)
        asked += 1
    for c in children:
        walk(c)


walk(root)
d.flush()
print(asked, flush=True)
sys.exit(0 if asked else 1)
