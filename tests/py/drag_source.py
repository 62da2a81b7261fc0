"""A drag source for the app's end-to-end tests: a small GTK 3 window at X, Y offering one
file (PATH) as `text/uri-list`, as a file manager does. The test drags from it onto the app
with xdotool (real X input through XTEST), so the drop reaches the app the way a drop from
any other program does (XDND).

Run with the system python (it needs python3-gi and GTK 3): /usr/bin/python3 drag_source.py
PATH X Y. Prints "ready" once its window is shown, "sent URI" when the drop asked for the
data, and "done" when the drag ended.
"""

import sys

import gi

gi.require_version("Gtk", "3.0")
gi.require_version("Gdk", "3.0")
from gi.repository import Gdk, GLib, Gtk  # noqa: E402

path, x, y = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
uri = GLib.filename_to_uri(path, None)

win = Gtk.Window(title="drag source")
win.set_default_size(140, 100)
win.move(x, y)
box = Gtk.EventBox()
box.add(Gtk.Label(label="drag me"))
win.add(box)
box.drag_source_set(Gdk.ModifierType.BUTTON1_MASK, [], Gdk.DragAction.COPY)
box.drag_source_add_uri_targets()


def get(_widget, _context, data, _info, _time):
    data.set_uris([uri])
    print(f"sent {uri}", flush=True)


box.connect("drag-data-get", get)
box.connect("drag-end", lambda *_: print("done", flush=True))
win.connect("map-event", lambda *_: print("ready", flush=True))
win.connect("destroy", Gtk.main_quit)
win.show_all()
Gtk.main()
